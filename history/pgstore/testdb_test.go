package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/pgstore"
)

// The tests run against a real PostgreSQL server, each in a schema of its
// own that is dropped afterwards. An unreachable server fails them, unless
// skipEnv is set to 1.
const (
	urlEnv     = "MARLOWE_TEST_DATABASE_URL"
	skipEnv    = "MARLOWE_TEST_SKIP_POSTGRES"
	defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// testStore is a store in a test schema; it can reopen the schema and
// fake a newer schema version for the conformance suite.
type testStore struct {
	*pgstore.Store
	url, schema string
}

// openTest opens a store on a new schema, dropped when tb ends.
func openTest(tb testing.TB) *testStore {
	tb.Helper()
	if os.Getenv(skipEnv) == "1" {
		tb.Skipf("%s=1: PostgreSQL tests skipped", skipEnv)
	}
	url := os.Getenv(urlEnv)
	if url == "" {
		url = defaultURL
	}
	schema := fmt.Sprintf("historytest_%d_%08x", os.Getpid(), rand.Uint32())
	s := &testStore{url: url, schema: schema}
	s.Store = s.open(tb)
	tb.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			tb.Errorf("dropping test schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("dropping test schema %s: %v", schema, err)
		}
	})
	return s
}

func (s *testStore) open(tb testing.TB) *pgstore.Store {
	tb.Helper()
	st, err := pgstore.Open(context.Background(), s.url, pgstore.Options{Schema: s.schema, ReadConns: 6})
	if err != nil {
		tb.Fatalf("PostgreSQL (%s=%s): %v; set %s=1 to skip the PostgreSQL tests", urlEnv, s.url, err, skipEnv)
	}
	return st
}

// Reopen opens a second store on the same schema.
func (s *testStore) Reopen(t *testing.T) history.Backend {
	return &testStore{Store: s.open(t), url: s.url, schema: s.schema}
}

// SchemaVersionSet records a schema version as a newer binary would.
func (s *testStore) SchemaVersionSet(ctx context.Context, version int) error {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "INSERT INTO "+pgx.Identifier{s.schema, "schema_migrations"}.Sanitize()+
		" (version, name) VALUES ($1, 'from a newer binary')", version)
	return err
}
