package storagetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DatabaseURL returns the PostgreSQL database the tests may use,
// MARLOWE_TEST_DATABASE_URL. Without it the test is skipped, except under
// CI (CI=true), where PostgreSQL tests must run: there it fails.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("MARLOWE_TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MARLOWE_TEST_DATABASE_URL is not set under CI")
		}
		t.Skip("MARLOWE_TEST_DATABASE_URL is not set")
	}
	return base
}

// SchemaURL returns the database URL base with its search_path set to
// schema: the URL of a store whose tables live in that schema.
func SchemaURL(t testing.TB, base, schema string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// DefaultPostgresURL is the store tests' database when
// MARLOWE_TEST_DATABASE_URL is not set.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresURL returns the database of the store tests:
// MARLOWE_TEST_DATABASE_URL, or DefaultPostgresURL when it is not set. A
// server that does not answer fails the test, unless
// MARLOWE_TEST_SKIP_POSTGRES=1, which skips the PostgreSQL tests.
func PostgresURL(t testing.TB) string {
	t.Helper()
	if os.Getenv("MARLOWE_TEST_SKIP_POSTGRES") == "1" {
		t.Skip("MARLOWE_TEST_SKIP_POSTGRES=1: PostgreSQL tests are skipped")
	}
	u := os.Getenv("MARLOWE_TEST_DATABASE_URL")
	if u == "" {
		u = DefaultPostgresURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("PostgreSQL at MARLOWE_TEST_DATABASE_URL (%s) does not answer: %v "+
			"(set MARLOWE_TEST_SKIP_POSTGRES=1 to skip these tests)", u, err)
	}
	_ = conn.Close(ctx)
	return u
}

// NewSchema returns the name of a schema of the database at url for one
// test, prefix_PID_RANDOM, and drops it, with everything in it, when the
// test ends. It creates nothing: the store under test creates its schema
// (CreateSchema makes one for tests that need it made).
func NewSchema(t testing.TB, url, prefix string) string {
	t.Helper()
	schema := fmt.Sprintf("%s_%d_%08x", prefix, os.Getpid(), rand.Uint32())
	t.Cleanup(func() {
		if err := exec(url, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// CreateSchema is NewSchema with the schema created.
func CreateSchema(t testing.TB, url, prefix string) string {
	t.Helper()
	schema := NewSchema(t, url, prefix)
	if err := exec(url, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("creating schema %s (set MARLOWE_TEST_SKIP_POSTGRES=1 to skip): %v", schema, err)
	}
	return schema
}

// Tables returns the names of the tables in schema, sorted.
func Tables(t testing.TB, url, schema string) []string {
	t.Helper()
	var names []string
	err := withConn(url, func(ctx context.Context, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, schema)
		if err == nil {
			names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// withConn runs fn on a new connection to url, with 30 seconds for all of
// it.
func withConn(url string, fn func(ctx context.Context, conn *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", url, err)
	}
	defer conn.Close(ctx)
	return fn(ctx, conn)
}

// exec runs one statement on a new connection to url.
func exec(url, statement string) error {
	return withConn(url, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, statement)
		return err
	})
}
