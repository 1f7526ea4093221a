package historytest

import (
	"context"
	"testing"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/sqlitestore"
)

// OpenSQLite opens the embedded backend (sqlitestore) in dir and
// initializes it for the network magic, failing the test on an error. The
// caller closes it.
func OpenSQLite(t testing.TB, dir string, magic uint32) history.Backend {
	t.Helper()
	ctx := context.Background()
	b, err := sqlitestore.Open(ctx, dir, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Init(ctx, &history.InitParams{NetworkMagic: magic}); err != nil {
		t.Fatal(err)
	}
	return b
}
