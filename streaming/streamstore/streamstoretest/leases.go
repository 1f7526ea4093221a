package streamstoretest

// Stream leases: one holder at a time, acks fenced by the lease, turns
// taken, lapses and races.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/waitfor"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

func lease(name, holder string) *streamstore.StreamLeaseParams {
	return &streamstore.StreamLeaseParams{Name: name, Holder: holder, TTL: time.Minute}
}

// leaseOnceFree waits until l's holder gets the lease, which another
// holder has meanwhile (ErrLeased); any other error, or no lease within
// 10 s, fails the test with what.
func leaseOnceFree(t *testing.T, s streamstore.Store, l *streamstore.StreamLeaseParams, what string) {
	t.Helper()
	var err error
	if !waitfor.Poll(10*time.Second, func() bool {
		_, err = s.StreamLease(context.Background(), l)
		return !errors.Is(err, streamstore.ErrLeased)
	}) || err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// testLeaseExclusive: one holder at a time; the holder renews; a release
// frees it; the lease returns the stored cursor, moved by another holder's
// acknowledgement.
func testLeaseExclusive(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	if _, err := s.StreamLease(ctx, lease("ghost", "a")); !errors.Is(err, streamstore.ErrNotFound) {
		t.Fatalf("lease of a missing stream: %v", err)
	}
	if err := s.StreamCreate(ctx, sample("s")); err != nil {
		t.Fatal(err)
	}
	got, err := s.StreamLease(ctx, lease("s", "a"))
	if err != nil || got.Cursor != "120:0" || got.Batch != 0 {
		t.Fatalf("first lease: %+v %v", got, err)
	}
	if _, err := s.StreamLease(ctx, lease("s", "b")); !errors.Is(err, streamstore.ErrLeased) {
		t.Fatalf("lease while a holds it: %v", err)
	}
	if _, err := s.StreamLease(ctx, lease("s", "a")); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	// Another holder's release changes nothing.
	if err := s.StreamRelease(ctx, lease("s", "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StreamLease(ctx, lease("s", "b")); !errors.Is(err, streamstore.ErrLeased) {
		t.Fatalf("lease after another holder's release: %v", err)
	}
	if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "150", Batch: 1, Records: 30, Holder: "a"}); err != nil {
		t.Fatalf("ack under the lease: %v", err)
	}
	// The ack ended a's round trip: b (which asked) takes the next one and
	// sees the cursor a acknowledged.
	got, err = s.StreamLease(ctx, lease("s", "b"))
	if err != nil || got.Cursor != "150" || got.Batch != 1 || got.Records != 30 {
		t.Fatalf("b's lease after a's ack: %+v %v", got, err)
	}
	if err := s.StreamRelease(ctx, lease("s", "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StreamLease(ctx, lease("s", "a")); err != nil {
		t.Fatalf("lease after b's release: %v", err)
	}
}

// testLeaseAckFenced: an acknowledgement made under a lease the holder no
// longer has changes nothing; a stale one stays ErrStale.
func testLeaseAckFenced(t *testing.T, open Opener) {
	ctx := context.Background()
	s := withStream(t, open, "s")
	if _, err := s.StreamLease(ctx, lease("s", "a")); err != nil {
		t.Fatal(err)
	}
	err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "200", Batch: 1, Records: 5, Holder: "b"})
	if !errors.Is(err, streamstore.ErrLeased) {
		t.Fatalf("ack by a process without the lease: %v", err)
	}
	if err := s.StreamRelease(ctx, lease("s", "a")); err != nil {
		t.Fatal(err)
	}
	err = s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "200", Batch: 1, Records: 5, Holder: "a"})
	if !errors.Is(err, streamstore.ErrLeased) {
		t.Fatalf("ack after the lease was released: %v", err)
	}
	if got, _ := s.StreamGet(ctx, "s"); got.Cursor != "120:0" || got.Batch != 0 || got.Records != 0 {
		t.Fatalf("fenced acks moved the stream: %+v", got)
	}
	if _, err := s.StreamLease(ctx, lease("s", "a")); err != nil {
		t.Fatal(err)
	}
	if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "200", Batch: 2, Records: 5, Holder: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StreamLease(ctx, lease("s", "a")); err != nil {
		t.Fatal(err)
	}
	err = s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "190", Batch: 2, Records: 5, Holder: "a"})
	if !errors.Is(err, streamstore.ErrStale) {
		t.Fatalf("second ack of batch 2: %v", err)
	}
	if _, err := s.StreamLease(ctx, lease("ghost", "a")); !errors.Is(err, streamstore.ErrNotFound) {
		t.Fatalf("lease of a missing stream: %v", err)
	}
	err = s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "ghost", Cursor: "1", Batch: 1, Holder: "a"})
	if !errors.Is(err, streamstore.ErrNotFound) {
		t.Fatalf("ack of a missing stream under a lease: %v", err)
	}
}

// testLeaseTakeTurns: two holders that both want the stream alternate;
// one alone keeps it.
func testLeaseTakeTurns(t *testing.T, open Opener) {
	ctx := context.Background()
	s := withStream(t, open, "s")
	// Alone, a takes round trip after round trip.
	for b := int64(1); b <= 3; b++ {
		if _, err := s.StreamLease(ctx, lease("s", "a")); err != nil {
			t.Fatalf("a alone, round trip %d: %v", b, err)
		}
		if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: fmt.Sprint(b), Batch: b, Records: 1, Holder: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	// Both want it: b asks while a has a batch in flight; once a's round
	// trip ends, a yields the next one to b even when a asks first, and
	// so on: the batches alternate.
	holder := "a"
	if _, err := s.StreamLease(ctx, lease("s", holder)); err != nil {
		t.Fatal(err)
	}
	for b := int64(4); b <= 9; b++ {
		other := map[string]string{"a": "b", "b": "a"}[holder]
		if _, err := s.StreamLease(ctx, lease("s", other)); !errors.Is(err, streamstore.ErrLeased) {
			t.Fatalf("round trip %d: %s's lease while %s holds it: %v", b, other, holder, err)
		}
		if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: fmt.Sprint(b), Batch: b, Records: 1, Holder: holder}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.StreamLease(ctx, lease("s", holder)); !errors.Is(err, streamstore.ErrLeased) {
			t.Fatalf("round trip %d: %s took the stream again although %s asked for it: %v", b+1, holder, other, err)
		}
		if _, err := s.StreamLease(ctx, lease("s", other)); err != nil {
			t.Fatalf("round trip %d: %s, which asked, did not get the stream: %v", b+1, other, err)
		}
		holder = other
	}
	if err := s.StreamRelease(ctx, lease("s", holder)); err != nil {
		t.Fatal(err)
	}
	// An ask lapses: the last holder, alone again, is not kept waiting for
	// a process that asked once and went away.
	if _, err := s.StreamLease(ctx, &streamstore.StreamLeaseParams{Name: "s", Holder: holder, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	gone := map[string]string{"a": "b", "b": "a"}[holder]
	if _, err := s.StreamLease(ctx, &streamstore.StreamLeaseParams{Name: "s", Holder: gone, TTL: 30 * time.Millisecond}); !errors.Is(err, streamstore.ErrLeased) {
		t.Fatal(err)
	}
	if err := s.StreamRelease(ctx, lease("s", holder)); err != nil {
		t.Fatal(err)
	}
	leaseOnceFree(t, s, lease("s", holder), fmt.Sprintf("%s alone after %s's ask lapsed", holder, gone))
	if err := s.StreamRelease(ctx, lease("s", holder)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.StreamGet(ctx, "s"); got.Batch != 9 || got.Records != 9 || got.Cursor != "9" {
		t.Fatalf("after the turns: %+v", got)
	}
}

// testLeaseLapses: a lease not renewed lapses, and the next holder takes
// it; the lapsed holder can no longer acknowledge.
func testLeaseLapses(t *testing.T, open Opener) {
	ctx := context.Background()
	s := withStream(t, open, "s")
	short := &streamstore.StreamLeaseParams{Name: "s", Holder: "a", TTL: 50 * time.Millisecond}
	if _, err := s.StreamLease(ctx, short); err != nil {
		t.Fatal(err)
	}
	leaseOnceFree(t, s, lease("s", "b"), "b's lease after a's lapsed")
	err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "300", Batch: 1, Records: 1, Holder: "a"})
	if !errors.Is(err, streamstore.ErrLeased) {
		t.Fatalf("ack by the lapsed holder: %v", err)
	}
}

// testLeaseConcurrent: holders racing for one stream never hold it at
// once, and every acknowledged batch counts exactly once.
func testLeaseConcurrent(t *testing.T, open Opener) {
	ctx := context.Background()
	s := withStream(t, open, "s")
	const holders, rounds = 4, 15
	var inFlight, overlaps, acked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, holders)
	for h := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := fmt.Sprintf("h%d", h)
			for done := 0; done < rounds; {
				st, err := s.StreamLease(ctx, lease("s", me))
				if errors.Is(err, streamstore.ErrLeased) {
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if inFlight.Add(1) != 1 {
					overlaps.Add(1)
				}
				next := st.Batch + 1
				inFlight.Add(-1)
				if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: fmt.Sprint(next), Batch: next, Records: 1, Holder: me}); err != nil {
					errs <- fmt.Errorf("%s: ack of batch %d under its lease: %w", me, next, err)
					return
				}
				acked.Add(1)
				done++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if overlaps.Load() != 0 {
		t.Fatalf("%d round trips overlapped another holder's", overlaps.Load())
	}
	got, err := s.StreamGet(ctx, "s")
	if err != nil || got.Batch != holders*rounds || got.Records != holders*rounds || acked.Load() != holders*rounds {
		t.Fatalf("after %d leased round trips: %+v %v (acked %d)", holders*rounds, got, err, acked.Load())
	}
}
