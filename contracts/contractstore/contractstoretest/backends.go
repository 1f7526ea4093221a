package contractstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/sqlcontracts"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/history/storage/storagetest"
)

// PostgresURL returns the test database's URL (storagetest.PostgresURL).
// A test that needs it fails when the server does not answer, unless
// MARLOWE_TEST_SKIP_POSTGRES=1, which skips it.
func PostgresURL(t testing.TB) string {
	t.Helper()
	url := storagetest.PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("PostgreSQL at MARLOWE_TEST_DATABASE_URL (%s) does not answer: %v "+
			"(set MARLOWE_TEST_SKIP_POSTGRES=1 to skip these tests)", url, err)
	}
	_ = conn.Close(ctx)
	return url
}

// NewSchema returns the name of a fresh schema for one test and drops it
// (with everything in it) when the test ends.
func NewSchema(t testing.TB, url string) string {
	t.Helper()
	return storagetest.NewSchema(t, url, "cvtest")
}

// OpenPostgres opens and initialises a PostgreSQL contract store in schema.
func OpenPostgres(t testing.TB, url, schema string) contractstore.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := storage.OpenPostgres(ctx, url, storage.PostgresOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return initStore(t, ctx, db)
}

// OpenSQLite opens and initialises an SQLite contract store in dir.
func OpenSQLite(t testing.TB, dir string) contractstore.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := storage.OpenSQLite(dir, storage.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return initStore(t, ctx, db)
}

// initStore opens and initialises the contract store on db, which it
// closes when it cannot.
func initStore(t testing.TB, ctx context.Context, db storage.DB) contractstore.Backend {
	t.Helper()
	b, err := sqlcontracts.Open(ctx, db)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	if err := b.Init(ctx); err != nil {
		b.Close()
		t.Fatal(err)
	}
	return b
}
