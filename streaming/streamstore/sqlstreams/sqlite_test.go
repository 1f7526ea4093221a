package sqlstreams_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
	"github.com/marlowe-follower/follower/streaming/streamstore/streamstoretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformanceSQLite(t *testing.T) {
	streamstoretest.Run(t, func(t *testing.T) streamstoretest.Opener {
		dir := t.TempDir()
		return func() (streamstore.Store, error) {
			return sqlstreams.OpenSQLite(context.Background(), dir)
		}
	})
}

func TestOwnFile(t *testing.T) {
	dir := t.TempDir()
	s, err := sqlstreams.OpenSQLite(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Path() != filepath.Join(dir, "streams.sqlite") {
		t.Fatalf("path %s", s.Path())
	}
	if _, err := os.Stat(s.Path()); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaTooNew: a database migrated by a newer binary is refused, and
// left alone.
func TestSchemaTooNewSQLite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := sqlstreams.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlstreams.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO ws_schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlstreams.OpenSQLite(ctx, dir); !errors.Is(err, streamstore.ErrSchemaTooNew) {
		t.Fatalf("open: %v", err)
	}
}

// TestTwoStoresOneFile: two stores on one file (two processes) write
// concurrently; the busy timeout makes each wait for the other's lock.
func TestTwoStoresOneFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var stores [2]*sqlstreams.Store
	for i := range stores {
		s, err := sqlstreams.OpenSQLite(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
		if err := s.StreamCreate(ctx, &streamstore.Stream{Name: string(rune('a' + i)), Filter: protocol.Filter{All: true},
			Mode: protocol.ModeAck, BatchSize: 10, Cursor: "0"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := streamstoretest.AckInParallel(ctx, []streamstore.Store{stores[0], stores[1]}, []string{"a", "b"}, 50); err != nil {
		t.Fatal(err)
	}
	for i := range stores {
		got, err := stores[1-i].StreamGet(ctx, string(rune('a'+i)))
		if err != nil || got.Batch != 50 {
			t.Fatalf("stream %d seen from the other store: %+v %v", i, got, err)
		}
	}
}
