package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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
