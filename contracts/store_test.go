package contracts_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestProjectionMatchesFold is the projection's property: after any
// sequence of blocks and random rollbacks, with restarts of the projection
// while the log grows, what it holds equals a fold from scratch of the
// log's current records.
func TestProjectionMatchesFold(t *testing.T) {
	for _, backend := range projectiontest.Backends {
		t.Run(backend, func(t *testing.T) {
			seeds := []int64{1, 2, 3}
			if testing.Short() {
				seeds = seeds[:1]
			}
			for _, seed := range seeds {
				p := projectiontest.Start(t, projectiontest.Options{Backend: backend,
					Generator: projectiontest.DefaultGenerator(seed), Batch: seed%2 == 0})
				rng := rand.New(rand.NewPCG(uint64(seed), 7))
				var sum projectiontest.Summary
				for round := range 6 {
					p.Advance(20 + rng.IntN(60))
					if rng.IntN(3) == 0 {
						p.StopProjection()
						p.Advance(rng.IntN(40))
						p.StartProjection()
					}
					p.Sync()
					sum = p.CheckAgainstFold()
					t.Logf("seed %d round %d: %+v", seed, round, sum)
				}
				markers := countMarkers(t, p)
				if p.Rollbacks() == 0 || markers == 0 || sum.Contracts == 0 || sum.Payouts == 0 || sum.Withdrawals == 0 {
					t.Fatalf("seed %d: the chain did not exercise the projection: %d rollbacks, %d markers, %+v",
						seed, p.Rollbacks(), markers, sum)
				}
				p.Close()
			}
		})
	}
}

func countMarkers(t *testing.T, p *projectiontest.Pipeline) int {
	recs, err := p.History.RecordList(context.Background(), &record.RecordListParams{
		Filter: record.Filter{Kinds: []record.Kind{record.KindRolledBack}}, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// flaky fails every nth commit, after writing nothing.
type flaky struct {
	contractstore.Backend
	n, calls atomic.Int64
	failed   atomic.Int64
}

func (f *flaky) Commit(ctx context.Context, p *contractstore.CommitParams) error {
	if c := f.calls.Add(1); c%f.n.Load() == 0 {
		f.failed.Add(1)
		return errors.New("injected commit failure")
	}
	return f.Backend.Commit(ctx, p)
}

// TestProjectionResumesAfterFailures: failed commits make the projector
// resume from the stored cursor; nothing is lost or applied twice.
func TestProjectionResumesAfterFailures(t *testing.T) {
	p := projectiontest.Start(t, projectiontest.Options{Backend: projectiontest.SQLite,
		Generator: projectiontest.DefaultGenerator(4)})
	p.StopProjection()
	f := &flaky{Backend: p.Contracts}
	f.n.Store(3)
	p.Contracts = f
	p.StartProjection()
	for range 4 {
		p.Advance(40)
		p.Sync()
	}
	if f.failed.Load() == 0 || p.Projection.Stats().Failures.Load() == 0 {
		t.Fatalf("no failure was injected (%d commits)", f.calls.Load())
	}
	f.n.Store(1 << 40)
	p.CheckAgainstFold()
}

// TestWaitFor: read-your-writes waits until the projection has applied a
// seq, and gives up when its context ends.
func TestWaitFor(t *testing.T) {
	p := projectiontest.Start(t, projectiontest.Options{Backend: projectiontest.SQLite,
		Generator: projectiontest.DefaultGenerator(5)})
	p.Advance(30)
	head := p.Sync()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := p.Projection.WaitFor(ctx, head+1000); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a seq never written: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- p.Projection.WaitFor(ctx, head+1)
	}()
	for p.Handle.Head() <= head {
		p.Advance(5)
		p.SyncHistory()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := p.Projection.Applied().Seq; got < head+1 {
		t.Fatalf("applied %d", got)
	}
}

// TestNewStoreRefusesAForeignHistory: a projection ahead of the log it
// follows was filled from another history.
func TestNewStoreRefusesAForeignHistory(t *testing.T) {
	p := projectiontest.Start(t, projectiontest.Options{Backend: projectiontest.SQLite,
		Generator: projectiontest.DefaultGenerator(6)})
	p.Advance(30)
	head := p.Sync()
	p.StopProjection()
	h, err := p.Contracts.HeadGet(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	next := h
	next.Seq = head + 10
	if err := p.Contracts.Commit(context.Background(), &contractstore.CommitParams{PrevSeq: h.Seq, Head: next}); err != nil {
		t.Fatal(err)
	}
	_, err = contracts.NewStore(context.Background(), contracts.Config{History: p.Handle, Backend: p.Contracts})
	if err == nil {
		t.Fatal("NewStore accepted a projection ahead of the log it follows")
	}
}
