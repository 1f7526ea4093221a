package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/sqlitestore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	historytest.Run(t, openTest)
}

// TestFile checks that Open creates the data directory and the database
// file in it, in WAL mode.
func TestFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "nested")
	st, err := sqlitestore.Open(context.Background(), dir, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Init(context.Background(), &history.InitParams{NetworkMagic: 2}); err != nil {
		t.Fatal(err)
	}
	if st.Path() != filepath.Join(dir, sqlitestore.FileName) {
		t.Fatalf("path %s", st.Path())
	}
	if _, err := os.Stat(st.Path()); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", st.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode %q, %v; want wal", mode, err)
	}
}
