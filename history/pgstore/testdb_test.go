package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/storage/storagetest"
)

// The tests run against a real PostgreSQL server (storagetest.PostgresURL),
// each in a schema of its own that is dropped afterwards. An unreachable
// server fails them, unless MARLOWE_TEST_SKIP_POSTGRES=1.

// testStore is a store in a test schema; it can reopen the schema and
// fake a newer schema version for the conformance suite.
type testStore struct {
	*pgstore.Store
	url, schema string
}

// openTest opens a store on a new schema, dropped when tb ends.
func openTest(tb testing.TB) *testStore {
	tb.Helper()
	url := storagetest.PostgresURL(tb)
	s := &testStore{url: url, schema: storagetest.NewSchema(tb, url, "historytest")}
	s.Store = s.open(tb)
	return s
}

func (s *testStore) open(tb testing.TB) *pgstore.Store {
	tb.Helper()
	st, err := pgstore.Open(context.Background(), s.url, pgstore.Options{Schema: s.schema, ReadConns: 6})
	if err != nil {
		tb.Fatalf("PostgreSQL (MARLOWE_TEST_DATABASE_URL=%s): %v; set MARLOWE_TEST_SKIP_POSTGRES=1 to skip the PostgreSQL tests", s.url, err)
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
