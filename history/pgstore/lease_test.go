package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/history/storage/storagetest"

	"github.com/marlowe-follower/follower/chainsync/waitfor"
)

// waitFor waits until cond holds; the test fails after d.
var waitFor = waitfor.Until // (t, d, what, cond)

// commitTip commits a checkpoint-only batch of the history at block n.
func (p *fencedProcess) commitTip(n int64) error {
	tip := chain.Tip{Point: chain.Point{Slot: uint64(n)}, BlockNo: uint64(n)}
	return p.history.Commit(context.Background(), &history.CommitParams{Checkpoint: history.CheckpointUpdate{Tip: tip}})
}

// TestWriterLeaseHandover: the first process takes the lease at once (a
// new schema's lease was never held) and renews it; a second waits for it
// as a standby (told who holds it), and a reader sees the holder, its
// epoch and a fresh renewal. When the holder lets it go the standby takes
// it at once, with the next epoch, although its own wait for the stored
// expiry would last an hour: the release's notice woke it. The first
// process writes no more.
func TestWriterLeaseHandover(t *testing.T) {
	ts := openTest(t)
	t.Cleanup(func() { _ = ts.Close() })
	a, b, reader := openProcess(t, ts), openProcess(t, ts), openProcess(t, ts)
	ctx := context.Background()
	la := a.acquire(t, ctx, storage.LeaseOptions{TTL: 900 * time.Millisecond, Holder: "a"})
	if la.Epoch() != 1 || !la.Valid() {
		t.Fatalf("the first lease: epoch %d, valid %v", la.Epoch(), la.Valid())
	}
	waitFor(t, 30*time.Second, "two renewals", func() bool { return la.Renewals() >= 2 })
	row, err := storage.ReadLease(ctx, reader.pg.Pool)
	if err != nil || row.Holder != "a" || row.Epoch != 1 || row.Expired() || row.TTL != 900*time.Millisecond ||
		row.RenewalAge() > row.TTL || row.Remaining() <= 0 {
		t.Fatalf("the lease as a reader reads it: %+v (%v)", row, err)
	}

	var mu sync.Mutex
	var seen []storage.LeaseRow
	standby := acquireAsync(t, b, storage.LeaseOptions{TTL: time.Hour, Holder: "b", Waiting: func(r storage.LeaseRow) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r)
	}})
	waitFor(t, 30*time.Second, "the standby waiting", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 1
	})
	mu.Lock()
	if seen[0].Holder != "a" || seen[0].Epoch != 1 {
		t.Errorf("the standby was told %+v", seen[0])
	}
	mu.Unlock()
	select {
	case <-standby:
		t.Fatal("the standby took a lease that is held and renewed")
	default:
	}
	if err := a.commitTip(1); err != nil {
		t.Fatalf("the holder's commit: %v", err)
	}

	if err := la.Release(); err != nil {
		t.Fatal(err)
	}
	lb := took(t, standby, "its holder let it go")
	if lb.Epoch() != 2 || lb.Takeover() != storage.TakeoverReleased {
		t.Fatalf("the standby's epoch %d, taken as %q", lb.Epoch(), lb.Takeover())
	}
	if err := a.commitTip(2); err == nil {
		t.Fatal("a process that let its lease go committed")
	}
	if err := b.commitTip(2); err != nil {
		t.Fatalf("the new holder's commit: %v", err)
	}
	if row, err := storage.ReadLease(ctx, reader.pg.Pool); err != nil || row.Holder != "b" || row.Epoch != 2 || row.Expired() {
		t.Fatalf("the lease after the handover: %+v (%v)", row, err)
	}
}

// TestWriterLeaseHungHolder: the holder's database traffic stops (a proxy
// stops forwarding it, the TCP sessions open, as in a partition or a
// pause). Its renewals fail; by its own clock the lease lapses before the
// database's expiry, and from then on its writes are refused at once
// (storage.ErrLeaseLapsed, nothing sent). Its session lives on in the
// server, so the standby that waits for it is not woken: it takes the
// lease once it has expired, with the next epoch, and then the session
// lock (ending the hung holder's session that held it). When the traffic
// flows again the old holder's next renewal finds the lease taken: it is
// lost (Lost, its error naming the new holder) and its writes fail with
// record.ErrFenced.
func TestWriterLeaseHungHolder(t *testing.T) {
	ts, a, proxy, b, reader := openTakeover(t)
	ctx := context.Background()
	const ttl = 1200 * time.Millisecond
	la := a.acquire(t, ctx, storage.LeaseOptions{TTL: ttl, Holder: "a"})
	if err := a.commitTip(1); err != nil {
		t.Fatal(err)
	}
	standby := acquireAsync(t, b, storage.LeaseOptions{TTL: ttl, Holder: "b"})

	waitFor(t, 30*time.Second, "the standby waiting for the holder's session", waitingForSessionLock(t, reader, ts))
	proxy.Pause()
	waitFor(t, 30*time.Second, "the holder's lease lapsing", func() bool { return !la.Valid() })
	if err := a.commitTip(2); !errors.Is(err, storage.ErrLeaseLapsed) {
		t.Fatalf("a commit of the lapsed holder: %v, want storage.ErrLeaseLapsed", err)
	}
	lb := took(t, standby, "it expired")
	if lb.Epoch() != la.Epoch()+1 || lb.Takeover() != storage.TakeoverExpired {
		t.Fatalf("the standby's epoch %d after %d, taken as %q", lb.Epoch(), la.Epoch(), lb.Takeover())
	}
	waitFor(t, 30*time.Second, "the new holder's session lock", lb.SessionLocked)
	namesItsSession(t, reader, lb)
	select {
	case <-la.Lost():
		t.Fatal("the holder learnt of its loss while cut off")
	default:
	}

	proxy.Resume()
	handedOver(t, la, a, b, b, 2)
}

// TestWriterLeaseRenewsAfterALapse: a holder cut off for longer than its
// TTL while nobody else wants the lease renews it when its traffic flows
// again (the row still carries its epoch) and commits again.
func TestWriterLeaseRenewsAfterALapse(t *testing.T) {
	ts := openTest(t)
	t.Cleanup(func() { _ = ts.Close() })
	a, proxy := openBehindProxy(t, ts)
	reader := openProcess(t, ts)
	ctx := context.Background()
	la := a.acquire(t, ctx, storage.LeaseOptions{TTL: 600 * time.Millisecond, Holder: "a"})
	proxy.Pause()
	waitFor(t, 30*time.Second, "the lease expired in the database", func() bool {
		row, err := storage.ReadLease(ctx, reader.pg.Pool)
		return err == nil && row.Expired()
	})
	if la.Valid() {
		t.Fatal("the holder's lease is valid past the database's expiry")
	}
	proxy.Resume()
	waitFor(t, 30*time.Second, "the lease renewed", la.Valid)
	if err := a.commitTip(1); err != nil {
		t.Fatalf("the holder's commit after renewing: %v", err)
	}
	if la.Err() != nil || la.RenewalFailures() == 0 {
		t.Fatalf("lost %v, %d failed renewals", la.Err(), la.RenewalFailures())
	}
}

// handedOver checks the end of a handover from a, whose lease was la, to
// b, which took it as "b" at epoch 2: a learns of its loss and is fenced,
// its commit of block 2 refused; b commits block n, which reader reads.
func handedOver(t *testing.T, la *storage.Lease, a, b, reader *fencedProcess, n int64) {
	t.Helper()
	select {
	case <-la.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("the old holder did not learn that its lease was taken")
	}
	if err := la.Err(); !errors.Is(err, record.ErrFenced) || !strings.Contains(err.Error(), "b took the writer lease (epoch 2") {
		t.Fatalf("the loss: %v", err)
	}
	if err := a.commitTip(2); !errors.Is(err, record.ErrFenced) {
		t.Fatalf("a commit of the old holder: %v, want record.ErrFenced", err)
	}
	if err := b.commitTip(n); err != nil {
		t.Fatalf("the new holder's commit: %v", err)
	}
	cp, err := reader.history.CheckpointGet(context.Background())
	if err != nil || cp.Tip.BlockNo != uint64(n) {
		t.Fatalf("the checkpoint: %+v (%v)", cp, err)
	}
}

// openBehindProxy opens a process on ts whose connections go through a
// openTakeover opens the processes of a takeover on a new test schema: a,
// the holder, whose traffic goes through proxy, b, the standby, and a
// reader.
func openTakeover(t *testing.T) (ts *testStore, a *fencedProcess, proxy *storagetest.Proxy, b, reader *fencedProcess) {
	t.Helper()
	ts = openTest(t)
	t.Cleanup(func() { _ = ts.Close() })
	a, proxy = openBehindProxy(t, ts)
	return ts, a, proxy, openProcess(t, ts), openProcess(t, ts)
}

// proxy the test can pause (a partition) or close (its sessions cut).
func openBehindProxy(t *testing.T, ts *testStore) (*fencedProcess, *storagetest.Proxy) {
	t.Helper()
	u, err := url.Parse(ts.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := storagetest.NewProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	viaProxy, err := proxy.URL(ts.url)
	if err != nil {
		t.Fatal(err)
	}
	return openProcess(t, &testStore{url: viaProxy, schema: ts.schema}), proxy
}
