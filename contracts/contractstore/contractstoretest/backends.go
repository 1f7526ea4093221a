package contractstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/sqlcontracts"
	"github.com/marlowe-follower/follower/history/storage"
)

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
