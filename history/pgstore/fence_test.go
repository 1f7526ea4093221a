package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/sqlcontracts"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
)

// fencedProcess is one process's stores on a schema: its own pool, whose
// writer epoch fences the history's commits, the projection's and the
// durable streams' acks.
type fencedProcess struct {
	pg        *storage.Postgres
	history   *pgstore.Store
	contracts *sqlcontracts.Store
	streams   *sqlstreams.Store
}

func openProcess(t *testing.T, ts *testStore) *fencedProcess {
	t.Helper()
	ctx := context.Background()
	pg, err := storage.OpenPostgres(ctx, ts.url, storage.PostgresOptions{Schema: ts.schema})
	if err != nil {
		t.Fatal(err)
	}
	p := &fencedProcess{pg: pg}
	if p.history, err = pgstore.New(pg); err != nil {
		t.Fatal(err)
	}
	if err := p.history.Init(ctx, &history.InitParams{NetworkMagic: 42}); err != nil {
		t.Fatal(err)
	}
	if p.contracts, err = sqlcontracts.New(ctx, pg); err != nil {
		t.Fatal(err)
	}
	if err := p.contracts.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if p.streams, err = sqlstreams.New(ctx, pg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.streams.Close()
		_ = p.contracts.Close()
		_ = p.history.Close()
		_ = pg.Close()
	})
	return p
}

// writeAll commits a checkpoint-only batch of the history at tip block n,
// a projection batch moving its cursor to seq n (from prev) and an ack of
// stream s's batch n; it returns the three errors.
func (p *fencedProcess) writeAll(n, prev int64) (hist, proj, ack error) {
	ctx := context.Background()
	tip := chain.Tip{Point: chain.Point{Slot: uint64(n)}, BlockNo: uint64(n)}
	hist = p.history.Commit(ctx, &history.CommitParams{Checkpoint: history.CheckpointUpdate{Tip: tip}})
	proj = p.contracts.Commit(ctx, &contractstore.CommitParams{PrevSeq: prev,
		Head: contractstore.Head{Position: contractstore.Position{Seq: n}}})
	ack = p.streams.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "1", Batch: n})
	return hist, proj, ack
}

// acquire takes the writer lease on p's pool with a TTL long enough that
// no renewal runs during a test, unless ttl is given.
func (p *fencedProcess) acquire(t *testing.T, ctx context.Context, opts storage.LeaseOptions) *storage.Lease {
	t.Helper()
	if opts.TTL == 0 {
		opts.TTL = time.Hour
	}
	if opts.Holder == "" {
		opts.Holder = storage.ProcessName()
	}
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	l, err := acquireLease(ctx, p.pg, opts)
	if err != nil {
		t.Fatalf("acquiring the writer lease: %v", err)
	}
	t.Cleanup(func() { _ = l.Release() })
	return l
}

// acquireLease prepares a lease on pg and takes it.
func acquireLease(ctx context.Context, pg *storage.Postgres, opts storage.LeaseOptions) (*storage.Lease, error) {
	l, err := pg.NewLease(opts)
	if err != nil {
		return nil, err
	}
	if err := l.Acquire(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// expireLease makes the stored lease expire now, as it does when its holder
// hangs past its TTL.
func expireLease(t *testing.T, p *fencedProcess) {
	t.Helper()
	if _, err := p.pg.Pool.Exec(context.Background(), `UPDATE writer_lease SET expires_at = clock_timestamp()`); err != nil {
		t.Fatal(err)
	}
}

// TestWriterEpochFences: a process that took the writer lease writes; once
// another took it (a newer epoch), each of its writes (the history's
// commit, the projection's, a stream's ack) fails with record.ErrFenced and
// changes nothing, while the new holder's land. A process without a lease
// (a reader's) is not fenced.
func TestWriterEpochFences(t *testing.T) {
	ts := openTest(t)
	t.Cleanup(func() { _ = ts.Close() })
	a, b := openProcess(t, ts), openProcess(t, ts)
	ctx := context.Background()
	if err := a.streams.StreamCreate(ctx, &streamstore.Stream{Name: "s", Filter: protocol.Filter{All: true},
		Mode: protocol.ModeAck, BatchSize: 10, Cursor: "0"}); err != nil {
		t.Fatal(err)
	}
	la := a.acquire(t, ctx, storage.LeaseOptions{})
	if ea := la.Epoch(); ea < 1 || a.pg.Epoch() != ea {
		t.Fatalf("first epoch %d, the pool's %d", ea, a.pg.Epoch())
	}
	if h, p, k := a.writeAll(1, 0); h != nil || p != nil || k != nil {
		t.Fatalf("the holder's writes: %v, %v, %v", h, p, k)
	}
	// The holder hangs (its lease expires in the database) and b takes
	// over; a's lease is still valid by its own clock, and the epoch is
	// what refuses its writes.
	expireLease(t, a)
	lb := b.acquire(t, ctx, storage.LeaseOptions{})
	if lb.Epoch() != la.Epoch()+1 {
		t.Fatalf("second epoch %d after %d", lb.Epoch(), la.Epoch())
	}
	h, p, k := a.writeAll(2, 1)
	for what, err := range map[string]error{"history commit": h, "projection commit": p, "stream ack": k} {
		if !errors.Is(err, record.ErrFenced) {
			t.Errorf("the fenced process's %s: %v, want record.ErrFenced", what, err)
		}
	}
	cp, err := b.history.CheckpointGet(ctx)
	if err != nil || cp.Tip.BlockNo != 1 {
		t.Fatalf("the fenced commit landed: tip %d (%v)", cp.Tip.BlockNo, err)
	}
	if st, err := b.streams.StreamGet(ctx, "s"); err != nil || st.Batch != 1 {
		t.Fatalf("the fenced ack landed: %+v (%v)", st, err)
	}
	if h, p, k := b.writeAll(2, 1); h != nil || p != nil || k != nil {
		t.Fatalf("the new holder's writes: %v, %v, %v", h, p, k)
	}
	// A third process without a lease, as a reader acknowledging a
	// durable stream, is not fenced.
	c := openProcess(t, ts)
	if err := c.streams.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "1", Batch: 3}); err != nil {
		t.Fatalf("an unfenced ack: %v", err)
	}
}

// TestLeaseTakeoverEndsAPausedWriter: a previous holder stopped in the
// middle of a write transaction (a process paused with it open) holds the
// epoch row; once its lease has expired, the next holder's takeover ends
// that session after EpochGrace instead of waiting for it, and the paused
// transaction cannot commit.
func TestLeaseTakeoverEndsAPausedWriter(t *testing.T) {
	ts := openTest(t)
	t.Cleanup(func() { _ = ts.Close() })
	a, b := openProcess(t, ts), openProcess(t, ts)
	ctx := context.Background()
	a.acquire(t, ctx, storage.LeaseOptions{})
	tx, err := a.pg.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // ended by the server
	if err := a.pg.CheckEpoch(ctx, tx); err != nil {
		t.Fatal(err)
	}
	var paused int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&paused); err != nil {
		t.Fatal(err)
	}
	expireLease(t, a)
	var mu sync.Mutex
	var ended []int
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	b.acquire(t, wait, storage.LeaseOptions{Ended: func(pid int) {
		mu.Lock()
		defer mu.Unlock()
		ended = append(ended, pid)
	}})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ended, []int{paused}) {
		t.Fatalf("ended %v, the paused session is %d", ended, paused)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the paused transaction committed")
	}
}
