package stores_test

import (
	"context"
	"errors"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/stores"
	"github.com/marlowe-follower/follower/history/record"
)

// TestOpen: Open migrates a new embedded store's three lines to the
// binary's versions, records the network and opens the three stores; a
// second Open of the same directory finds nothing to migrate, and one for
// another network is refused with record.ErrWrongNetwork.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	st, cfg := stores.OpenDevnetStore(t)
	if st.History == nil || st.Contracts == nil || st.Streams == nil || st.Postgres() != nil {
		t.Fatalf("stores: %+v", st)
	}
	lines, err := stores.MigrationLines(st.DB.Dialect())
	if err != nil {
		t.Fatal(err)
	}
	status, err := st.DB.Check(ctx, lines...)
	if err != nil || len(status) != 3 {
		t.Fatalf("check: %v %+v", err, status)
	}
	for _, s := range status {
		if s.Stored != s.Latest || len(s.Pending) != 0 {
			t.Errorf("line %s at %d of %d, pending %v", s.Line, s.Stored, s.Latest, s.Pending)
		}
	}
	if err := st.CheckStreams(ctx, devnet.NetworkMagic); err != nil {
		t.Fatalf("no streams, an empty history: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := stores.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("a second open: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Node.NetworkMagic = 1
	if _, err := stores.Open(ctx, cfg); !errors.Is(err, record.ErrWrongNetwork) {
		t.Fatalf("another network: %v, want record.ErrWrongNetwork", err)
	}
}
