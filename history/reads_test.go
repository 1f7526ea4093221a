package history_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"

	"github.com/marlowe-follower/follower/chainsync/waitfor"
)

// TestReceivedRecordIsQueryable checks the seed's invariant between the
// store's two outputs: when a subscriber receives record e, a read issued
// then through the store's handle already contains e (by seq, in a list
// from e's seq, and in the head). The store pushes a batch live only once
// its commit returned, so a read can never be behind what was pushed.
func TestReceivedRecordIsQueryable(t *testing.T) {
	cfg := history.DefaultStoreConfig()
	cfg.BatchBlocks, cfg.BatchDelay, cfg.NearTip = 3, 2*time.Millisecond, 0
	f := newStoreFixture(t, cfg, "")
	defer f.stop()

	model := newChainModel(11, 12)
	const steps = 600
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	filters := []record.Filter{{}, {Tags: []string{"tag1"}}, {Kinds: []record.Kind{record.KindRolledBack}}}
	var wg sync.WaitGroup
	var liveN atomic.Int64
	checked := make([]atomic.Int64, len(filters))
	var lastSeen atomic.Int64 // newest seq the unfiltered subscriber received
	for i, filter := range filters {
		sub := f.handle.Subscribe(filter, record.From{Kind: record.FromTip})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			for {
				b, err := sub.Next(ctx)
				if err != nil {
					return
				}
				if b.Live {
					liveN.Add(1)
				}
				for _, e := range b.Records {
					got, err := f.handle.RecordGet(ctx, e.Seq)
					if ctx.Err() != nil {
						return // the test is over
					}
					if err != nil {
						t.Errorf("subscriber %d received seq %d, then reading it: %v", i, e.Seq, err)
						cancel()
						return
					}
					if got.Kind != e.Kind || got.Block != e.Block || got.TxIndex != e.TxIndex {
						t.Errorf("seq %d read back as %v, received as %v", e.Seq, got.Kind, e.Kind)
					}
					list, err := f.handle.RecordList(ctx, &record.RecordListParams{After: e.Seq - 1, Limit: 1, Filter: filter})
					if ctx.Err() != nil {
						return
					}
					if err != nil || len(list) != 1 || list[0].Seq != e.Seq {
						t.Errorf("subscriber %d received seq %d; a filtered list from it then gave %v (%v)", i, e.Seq, seqsOf(list), err)
						cancel()
						return
					}
					if h := f.handle.Head(); h < e.Seq {
						t.Errorf("subscriber %d received seq %d while the head says %d", i, e.Seq, h)
					}
					checked[i].Add(1)
					if i == 0 {
						lastSeen.Store(e.Seq)
					}
				}
			}
		}()
	}

	for range steps {
		st := model.Next()
		model.pending.Add(1)
		st.Release = func() { model.pending.Add(-1) }
		f.system.Root.Send(f.pid, st)
		// Bursts and pauses: subscribers go live in the pauses, until
		// everything sent is committed (a store that commits without
		// pause keeps refusing to take them live).
		if model.Rand().IntN(4) == 0 {
			waitfor.Until(t, time.Minute, "the burst committed", func() bool { return model.pending.Load() == 0 || ctx.Err() != nil })
		}
	}
	waitfor.Until(t, time.Minute, "every step committed", func() bool { return model.pending.Load() == 0 || ctx.Err() != nil })
	head := f.handle.Head()
	// Let the subscribers receive up to the head, then stop them.
	if !waitfor.Poll(2*time.Minute, func() bool { return lastSeen.Load() >= head || ctx.Err() != nil }) {
		t.Errorf("the unfiltered subscriber reached seq %d of %d", lastSeen.Load(), head)
	}
	cancel()
	wg.Wait()
	counts := make([]int64, len(checked))
	for i := range checked {
		counts[i] = checked[i].Load()
	}
	if counts[0] == 0 || counts[1] == 0 || counts[2] == 0 {
		t.Fatalf("a subscriber received nothing (head %d, records checked per subscriber %v)", head, counts)
	}
	if liveN.Load() == 0 {
		t.Fatal("no batch was delivered live: the test did not exercise the hand-over from commit to subscriber")
	}
	t.Logf("head %d; records checked per subscriber: %v; live batches %d", head, counts, liveN.Load())
}

func seqsOf(rs []record.Record) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}
