package storage_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage"
)

var errDup = errors.New("duplicate row")

func TestErrors(t *testing.T) {
	db := sqliteConn(t, filepath.Join(t.TempDir(), "e.sqlite"))
	for _, q := range []string{`CREATE TABLE things (id INTEGER PRIMARY KEY)`, `CREATE TABLE other (k TEXT UNIQUE)`,
		`INSERT INTO things VALUES (1)`, `INSERT INTO other VALUES ('a')`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	e := &storage.Errors{Prefix: "test store", Duplicate: func(table string) error {
		if table == "things" {
			return errDup
		}
		return nil
	}}
	_, err := db.Exec(`INSERT INTO things VALUES (1)`)
	if table, ok := storage.UniqueViolation(err); !ok || table != "things" {
		t.Fatalf("primary key violation: %q %v (%v)", table, ok, err)
	}
	if got := e.Translate("insert", err); !errors.Is(got, errDup) || !strings.HasPrefix(got.Error(), "test store: insert: ") {
		t.Fatalf("translated: %v", got)
	}
	_, err = db.Exec(`INSERT INTO other VALUES ('a')`)
	if table, ok := storage.UniqueViolation(err); !ok || table != "other" {
		t.Fatalf("unique violation: %q %v (%v)", table, ok, err)
	}
	if got := e.Translate("insert", err); errors.Is(got, errDup) {
		t.Fatalf("a table without a sentinel: %v", got)
	}
	err = db.QueryRow(`SELECT id FROM things WHERE id = 2`).Scan(new(int))
	if got := e.Translate("get", err); !errors.Is(got, record.ErrNotFound) || !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("no rows: %v", got)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	if !e.Close() || e.Close() {
		t.Fatal("Close should report the first call only")
	}
	if err := e.Check(); !errors.Is(err, record.ErrBackendClosed) {
		t.Fatalf("check after close: %v", err)
	}
	if got := e.Translate("get", errors.New("connection gone")); !errors.Is(got, record.ErrBackendClosed) {
		t.Fatalf("failure after close: %v", got)
	}
	if e.Translate("get", nil) != nil {
		t.Fatal("nil translated to an error")
	}
}
