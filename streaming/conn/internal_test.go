package conn

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestSendQueueBounds: the queue holds at most its frames and bytes (one
// oversized frame when empty), refuses at once or after the wait, and
// frees its waiters when room is made or it closes. It runs in a synctest
// bubble: synctest.Wait returns once a producer waits for room, and the
// waits' timers run on the bubble's clock.
func TestSendQueueBounds(t *testing.T) { synctest.Test(t, testSendQueueBounds) }

func testSendQueueBounds(t *testing.T) {
	q := newSendQueue(2, 10)
	if err := q.tryPush(make([]byte, 50), false); err != nil {
		t.Fatalf("an oversized frame into an empty queue: %v", err)
	}
	if err := q.tryPush([]byte("x"), false); !errors.Is(err, errQueueFull) {
		t.Fatalf("over the byte bound: %v", err)
	}
	f, ok := q.pop(nil)
	if !ok || len(f.b) != 50 {
		t.Fatal("pop")
	}
	for range 2 {
		if err := q.tryPush([]byte("abc"), true); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.tryPush([]byte("d"), false); !errors.Is(err, errQueueFull) {
		t.Fatalf("over the frame bound: %v", err)
	}
	start := time.Now()
	if err := q.push(context.Background(), []byte("d"), false, 30*time.Millisecond); !errors.Is(err, errQueueFull) ||
		time.Since(start) < 30*time.Millisecond {
		t.Fatalf("push into a full queue: %v after %s", err, time.Since(start))
	}
	// A waiting producer gets in when the writer takes a frame.
	done := make(chan error, 1)
	go func() { done <- q.push(context.Background(), []byte("e"), false, 5*time.Second) }()
	synctest.Wait()
	if f, _ := q.pop(nil); !f.pooled || string(f.b) != "abc" {
		t.Fatalf("pop %+v", f)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if q.len() != 2 {
		t.Fatalf("len %d", q.len())
	}
	// Closing wakes waiters and refuses frames; pop ends on its done channel.
	go func() { done <- q.push(context.Background(), []byte("f"), false, 5*time.Second) }()
	synctest.Wait()
	q.close()
	if err := <-done; !errors.Is(err, errQueueClosed) {
		t.Fatalf("push after close: %v", err)
	}
	if err := q.tryPush([]byte("g"), false); !errors.Is(err, errQueueClosed) {
		t.Fatalf("tryPush after close: %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	if _, ok := q.pop(stop); ok {
		t.Fatal("pop from a closed queue")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q2 := newSendQueue(1, 100)
	_ = q2.tryPush([]byte("a"), false)
	if err := q2.push(ctx, []byte("b"), false, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("push with a cancelled context: %v", err)
	}
}

// TestBudgetVictimMadeNoProgress: of two connections whose writers are
// both in a write, the budget cuts the one that made no progress since it
// took its frame, not the one that took its frame earlier but hands the
// socket part after part of it (a reader catching up).
func TestBudgetVictimMadeNoProgress(t *testing.T) {
	b := &Budget{limit: 1 << 20}
	reader, stuck := newSendQueue(4, 1<<20), newSendQueue(4, 1<<20)
	for _, q := range []*SendQueue{reader, stuck} {
		b.add(q)
		if err := q.tryPush(make([]byte, 100<<10), false); err != nil {
			t.Fatal(err)
		}
		if _, ok := q.pop(nil); !ok {
			t.Fatal("pop")
		}
	}
	now := time.Now().UnixNano()
	reader.writing.Store(now - int64(time.Minute)) // took its frame first
	stuck.writing.Store(now - int64(time.Second))
	if v := b.victim(); v != reader {
		t.Fatal("without progress, the writer in its write the longest is not the victim")
	}
	reader.progressed()
	if v := b.victim(); v != stuck {
		t.Fatal("the reader whose writer made progress is the victim, not the one stuck in its write")
	}
}
