package contracts_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/contractstoretest"
)

type fixedHead struct{ seq atomic.Int64 }

func (h *fixedHead) Head() int64 { return h.seq.Load() }

// TestViewWaitsForTheStoreAndTheHistory: a reader's minSeq wait ends only
// once the stored projection has applied the seq and the process's
// history has delivered it, whichever comes last.
func TestViewWaitsForTheStoreAndTheHistory(t *testing.T) {
	b := contractstoretest.OpenSQLite(t, t.TempDir())
	defer b.Close()
	hist := &fixedHead{}
	ctx := context.Background()
	v, err := contracts.NewView(ctx, b, hist, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if at := v.Applied(); at.Seq != 0 {
		t.Fatalf("an empty store's view is at seq %d", at.Seq)
	}
	wait := func() error {
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		return v.WaitFor(wctx, 5)
	}
	if err := wait(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for seq 5 on an empty store: %v", err)
	}
	// The writer's projection commits seq 5; this process's history has
	// not delivered it yet.
	if err := b.Commit(ctx, &contractstore.CommitParams{PrevSeq: 0, Head: contractstore.Head{Position: contractstore.Position{Seq: 5}}}); err != nil {
		t.Fatal(err)
	}
	if err := wait(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for seq 5 with the history at 0: %v", err)
	}
	if at := v.Applied(); at.Seq != 5 {
		t.Fatalf("the view read while waiting is at seq %d, want 5", at.Seq)
	}
	hist.seq.Store(5)
	if err := wait(); err != nil {
		t.Fatalf("waiting for seq 5 once both have it: %v", err)
	}
}
