package stores

import (
	"context"
	"errors"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
)

// OpenDevnetStore opens a new embedded store (in a temporary directory)
// for the devnet's network: for this package's tests, internal and
// external.
func OpenDevnetStore(t *testing.T) (*Stores, *config.Config) {
	t.Helper()
	cfg := &config.Config{}
	cfg.Store.DataDir = t.TempDir()
	cfg.Node.NetworkMagic = devnet.NetworkMagic
	st, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st, cfg
}

// TestOpenFailingLastStoreCloses: when the stream store, the last of the
// three, fails to open (here its schema is newer than the binary's, as a
// cancelled start-up fails it in the same place), what did open is closed
// and Close does not call the store that failed (a SIGTERM 20 ms into
// start-up once panicked there: a nil *sqlstreams.Store in the interface).
func TestOpenFailingLastStoreCloses(t *testing.T) {
	ctx := context.Background()
	st, cfg := OpenDevnetStore(t)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	db, _, err := OpenDB(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := db.(*storage.SQLite).File(ctx, sqlstreams.File)
	if err != nil {
		t.Fatal(err)
	}
	line, err := sqlstreams.Line(storage.DialectSQLite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write.ExecContext(ctx, `INSERT INTO `+line.Table+` (version, name) VALUES (?, 'from a newer binary')`,
		line.Latest()+1); err != nil {
		t.Fatal(err)
	}
	partial := &Stores{DB: db}
	err = partial.open(ctx, cfg.Node.NetworkMagic)
	if !errors.Is(err, record.ErrSchemaTooNew) {
		t.Fatalf("open: %v, want record.ErrSchemaTooNew from the stream store", err)
	}
	if partial.History == nil || partial.Contracts == nil || partial.Streams != nil {
		t.Fatalf("after the stream store failed: history %v, contracts %v, streams %v (want nil)",
			partial.History, partial.Contracts, partial.Streams)
	}
	if err := partial.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}
