package history_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/record"

	"github.com/marlowe-follower/follower/chainsync/waitfor"
)

// storeFixture runs a store actor over an embedded backend.
type storeFixture struct {
	t       testing.TB
	backend history.Backend
	system  *actor.ActorSystem
	pid     *actor.PID
	store   *history.Store
	handle  *history.Handle
	dir     string
}

func newStoreFixture(t testing.TB, cfg history.StoreConfig, dir string) *storeFixture {
	t.Helper()
	ctx := context.Background()
	if dir == "" {
		dir = t.TempDir()
	}
	b := historytest.OpenSQLite(t, dir, 42)
	st, err := history.NewStore(ctx, b, cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	sys := newSystem()
	pid := sys.Root.Spawn(st.Props())
	f := &storeFixture{t: t, backend: b, system: sys, pid: pid, store: st, handle: history.NewHandle(st, sys, pid), dir: dir}
	return f
}

func (f *storeFixture) stop() {
	_ = f.system.Root.PoisonFuture(f.pid).Wait()
	f.system.Shutdown()
	_ = f.backend.Close()
}

// chainModel is the synthetic chain of the store's tests, and how many of
// its steps were sent and are not yet committed.
type chainModel struct {
	*historytest.StepChain
	pending atomic.Int64
}

func newChainModel(seed1, seed2 uint64) *chainModel {
	return &chainModel{StepChain: historytest.NewStepChain(rand.New(rand.NewPCG(seed1, seed2)), 15)}
}

func header(n uint64, fork byte) chain.BlockHeader {
	var h chain.Hash32
	h[0], h[1], h[2] = byte(n), byte(n>>8), fork
	return chain.BlockHeader{Slot: n * 10, BlockNo: n, Hash: h}
}

// TestSnapshotThenLive hammers the hand-over: subscribers join at random
// moments with random filters and starting points while blocks and
// rollbacks are committed; each must receive exactly the records the
// invariant promises, in seq order, without gap or duplicate.
func TestSnapshotThenLive(t *testing.T) {
	cfg := history.DefaultStoreConfig()
	cfg.BatchBlocks, cfg.BatchDelay, cfg.NearTip, cfg.LiveQueue = 7, 5*time.Millisecond, 0, 2
	f := newStoreFixture(t, cfg, "")
	defer f.stop()
	f.handle.PageSize = 13

	model := newChainModel(3, 4)
	const steps = 1500
	var wg sync.WaitGroup
	done := make(chan struct{})
	finished := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	var sent atomic.Int64
	// The writer: bursts, and pauses until what it sent is committed, in
	// which subscribers go live.
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for range steps {
			st := model.Next()
			model.pending.Add(1)
			st.Release = func() { model.pending.Add(-1) }
			f.system.Root.Send(f.pid, st)
			sent.Add(1)
			if model.Rand().IntN(10) == 0 && !waitfor.Poll(time.Minute, func() bool { return model.pending.Load() == 0 }) {
				t.Error("a burst was not committed")
				return
			}
		}
	}()

	type result struct {
		from     record.From
		snapshot int64
		filter   record.Filter
		got      []record.Record
	}
	var results []*result
	var mu sync.Mutex
	filters := []record.Filter{
		{},
		{Contracts: []chain.TxOutRef{historytest.StepContract(1), historytest.StepContract(2)}},
		{RolesCurrency: [][]byte{{1}}},
		{Tags: []string{"tag0"}},
		{Kinds: []record.Kind{record.KindContractCreated, record.KindRolledBack}},
	}
	subRng := rand.New(rand.NewPCG(5, 6))
	for i := range 24 {
		// Subscribers join all along the writer's run, at random steps.
		at := int64(i*steps/24 + subRng.IntN(steps/24))
		waitfor.Until(t, time.Minute, "the writer's progress", func() bool { return sent.Load() >= at || finished() })
		r := &result{filter: filters[i%len(filters)]}
		r.from = historytest.NthStart(i, f.handle.Head())
		sub := f.handle.Subscribe(r.filter, r.from)
		r.snapshot = sub.Cursor().Snapshot
		if r.from.Kind == record.FromTip {
			r.from.Cursor = sub.Cursor()
		}
		mu.Lock()
		results = append(results, r)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			for {
				// Once everything is committed, a subscriber that gets
				// nothing more for a while has everything. Until then it
				// waits however long the writer takes (a loaded machine
				// under the race detector is slow; the test's own timeout
				// bounds a hang).
				caughtUp := finished() && model.pending.Load() == 0
				wait := time.Second
				if caughtUp {
					wait = 300 * time.Millisecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				b, err := sub.Next(ctx)
				cancel()
				if err != nil {
					if errors.Is(err, context.DeadlineExceeded) {
						if !caughtUp {
							continue
						}
						c := sub.Cursor()
						if sub.Live() || (c.Snapshot == 0 && c.Seq >= f.handle.Head()) {
							return
						}
						continue
					}
					t.Errorf("subscription: %v", err)
					return
				}
				r.got = append(r.got, b.Records...)
				// Slow readers fall behind and come back: this one reads
				// nothing while the store commits more batches than its
				// live queue holds.
				if rand.IntN(20) == 0 {
					c := f.store.Stats().Commits.Load() + uint64(cfg.LiveQueue) + 1
					waitfor.Poll(time.Minute, func() bool { return f.store.Stats().Commits.Load() >= c || finished() })
				}
			}
		}()
	}
	wg.Wait()

	// The whole log, for the expectations.
	ctx := context.Background()
	log := historytest.Log(t, f.backend)
	for i, r := range log {
		if r.Seq != int64(i+1) {
			t.Fatalf("log seq %d at position %d", r.Seq, i)
		}
	}
	index := map[chain.TxOutRef]*record.ContractIndex{}
	for _, r := range log {
		if r.Contract != nil {
			if _, ok := index[*r.Contract]; !ok {
				idx, err := f.backend.ContractGet(ctx, *r.Contract)
				if err == nil {
					index[*r.Contract] = idx
				}
			}
		}
	}
	rolledBack := historytest.RollbackMarkers(log)
	if rolledBack == 0 {
		t.Fatal("no rollback happened")
	}
	for i, r := range results {
		var want []record.Record
		for _, rec := range log {
			if !r.filter.Matches(&rec, idxOf(index, rec.Contract)) {
				continue
			}
			switch {
			case r.from.Kind == record.FromOrigin && rec.Seq <= r.snapshot:
				if rec.Kind != record.KindRolledBack && rec.Current(r.snapshot) {
					want = append(want, rec)
				}
			case r.from.Kind == record.FromOrigin || rec.Seq > r.from.Cursor.Seq:
				want = append(want, rec)
			}
		}
		if !slices.EqualFunc(seqs(r.got), seqs(want), func(a, b int64) bool { return a == b }) {
			t.Fatalf("subscriber %d (from %v, snapshot %d, filter %+v): got %d records, want %d\n got  %v\n want %v",
				i, r.from.Kind, r.snapshot, r.filter, len(r.got), len(want), head(seqs(r.got)), head(seqs(want)))
		}
	}
	t.Logf("log of %d records (%d rollbacks); %d subscribers checked; %d live drops",
		len(log), rolledBack, len(results), f.store.Stats().LiveDropped.Load())
}

func idxOf(m map[chain.TxOutRef]*record.ContractIndex, id *chain.TxOutRef) *record.ContractIndex {
	if id == nil {
		return nil
	}
	return m[*id]
}

func seqs(rs []record.Record) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

func head(s []int64) []int64 {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}

// newSystem returns an actor system for a test; protoactor's own logs are
// dropped (what the actors log goes to the test's logger).
func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
}
