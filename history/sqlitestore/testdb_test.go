package sqlitestore_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/sqlitestore"
)

// testStore is a store in a temporary directory; it can reopen the file
// and fake a newer schema version for the conformance suite.
type testStore struct {
	*sqlitestore.Store
	dir string
}

// openTest opens a store in a new temporary directory.
func openTest(tb testing.TB) *testStore {
	tb.Helper()
	s := &testStore{dir: tb.TempDir()}
	s.Store = s.open(tb)
	return s
}

func (s *testStore) open(tb testing.TB) *sqlitestore.Store {
	tb.Helper()
	st, err := sqlitestore.Open(context.Background(), s.dir, sqlitestore.Options{})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	return st
}

// Reopen opens a second store on the same file.
func (s *testStore) Reopen(t *testing.T) history.Backend {
	return &testStore{Store: s.open(t), dir: s.dir}
}

// SchemaVersionSet records a schema version as a newer binary would.
func (s *testStore) SchemaVersionSet(ctx context.Context, version int) error {
	db, err := sql.Open("sqlite", s.Path()+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES (?, 'from a newer binary')`, version)
	return err
}
