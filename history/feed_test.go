package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/chainsync/waitfor"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// TestFeedWaitsForItsGoLiveAnswer: a feed at the head asks the store to go
// live and is Waiting until the answer's Delivery has been taken; meanwhile
// Next has nothing to give (an actor that called it again on every step
// would spin until the answer came).
func TestFeedWaitsForItsGoLiveAnswer(t *testing.T) {
	f := newStoreFixture(t, history.DefaultStoreConfig(), "")
	defer f.stop()
	deliveries := make(chan *history.Delivery, 16)
	target := f.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if d, ok := c.Message().(*history.Delivery); ok {
			deliveries <- d
		}
	}))
	feed := f.handle.Feed(f.system, target, record.Filter{}, record.From{Kind: record.FromTip})
	defer feed.Close()
	if feed.Waiting() || feed.Live() {
		t.Fatal("a feed that has not read yet waits for nothing")
	}
	ctx := context.Background()
	if _, ok, err := feed.Next(ctx); ok || err != nil {
		t.Fatalf("Next at the head of an empty log: ok %v, err %v; want nothing", ok, err)
	}
	if !feed.Waiting() || feed.Live() {
		t.Fatalf("after asking to go live: waiting %v, live %v; want waiting", feed.Waiting(), feed.Live())
	}
	if _, ok, err := feed.Next(ctx); ok || err != nil || !feed.Waiting() {
		t.Fatalf("Next while waiting: ok %v, err %v, waiting %v; want nothing, still waiting", ok, err, feed.Waiting())
	}
	// The answer may be to ask again (the writer started meanwhile); the
	// feed waits again after each Next until it is live.
	for !feed.Live() {
		var d *history.Delivery
		select {
		case d = <-deliveries:
		case <-time.After(time.Minute):
			t.Fatal("the store did not answer the go-live request")
		}
		_, ok, again := feed.Take(d)
		switch {
		case ok:
			t.Fatal("a live batch from an empty log")
		case again:
			if _, ok, err := feed.Next(ctx); ok || err != nil || !feed.Waiting() {
				t.Fatalf("Next after the word to ask again: ok %v, err %v, waiting %v; want waiting", ok, err, feed.Waiting())
			}
		case !feed.Live() && !feed.Waiting():
			// (A Delivery for a request the feed has moved past gives
			// nothing and leaves it waiting for the one it made.)
			t.Fatal("the answer neither made the feed live nor asked it to call Next again, and it waits for nothing")
		}
	}
	if feed.Waiting() || !feed.Live() {
		t.Fatalf("after the answer: waiting %v, live %v; want live", feed.Waiting(), feed.Live())
	}
}

// TestFeedGoesLiveBehindTheHead: a feed a few records behind the head (as
// one whose catch-up ended just before a commit) asks to go live without
// reading and gets the records it missed from the store's tail as its
// first live batch; one further back than the tail reaches reads first.
func TestFeedGoesLiveBehindTheHead(t *testing.T) {
	cfg := history.DefaultStoreConfig()
	cfg.BatchDelay, cfg.NearTip, cfg.LiveTail = time.Millisecond, 0, 10
	f := newStoreFixture(t, cfg, "")
	defer f.stop()
	model := newChainModel(7, 8)
	for range 30 {
		// One step per commit: the tail holds whole batches.
		st := model.Next()
		model.pending.Add(1)
		st.Release = func() { model.pending.Add(-1) }
		f.system.Root.Send(f.pid, st)
		waitfor.Until(t, time.Minute, "the step committed", func() bool { return model.pending.Load() == 0 })
	}
	head, from := f.handle.Head(), f.handle.Stats().LiveFrom.Load()
	if head < 4 || from > head-3 || from < 1 {
		t.Fatalf("head %d, tail from %d: want a tail of at least 3 records, not the whole log", head, from)
	}
	ctx := context.Background()

	deliveries := make(chan *history.Delivery, 16)
	target := f.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if d, ok := c.Message().(*history.Delivery); ok {
			deliveries <- d
		}
	}))
	feed := f.handle.Feed(f.system, target, record.Filter{}, record.From{Kind: record.FromCursor, Cursor: record.Cursor{Seq: head - 3}})
	defer feed.Close()
	feed.SetPageSize(100)
	if b, ok, err := feed.Next(ctx); ok || err != nil || !feed.Waiting() {
		t.Fatalf("Next 3 behind the head: %d records, ok %v, err %v, waiting %v; want no read, waiting for the answer", len(b.Records), ok, err, feed.Waiting())
	}
	var got []int64
	for len(got) < 3 {
		select {
		case d := <-deliveries:
			b, ok, again := feed.Take(d)
			if again {
				t.Fatal("the store sent the feed back to catch up though its tail holds what it missed")
			}
			for _, r := range b.Records {
				got = append(got, r.Seq)
			}
			if ok && !b.Live {
				t.Fatal("a batch that is not live")
			}
		case <-time.After(time.Minute):
			t.Fatalf("the store did not answer: live %v, got %v", feed.Live(), got)
		}
	}
	if !feed.Live() || len(got) != 3 || got[0] != head-2 || got[2] != head {
		t.Fatalf("live %v, got seqs %v; want live with %d..%d", feed.Live(), got, head-2, head)
	}

	// Before the tail: the feed reads the backend first.
	far := f.handle.Feed(f.system, target, record.Filter{}, record.From{Kind: record.FromCursor, Cursor: record.Cursor{Seq: from - 1}})
	defer far.Close()
	far.SetPageSize(100)
	b, ok, err := far.Next(ctx)
	if err != nil || !ok || len(b.Records) == 0 || b.Records[0].Seq != from || b.Live {
		t.Fatalf("Next before the tail: %d records, ok %v, err %v; want a read from seq %d", len(b.Records), ok, err, from)
	}
}
