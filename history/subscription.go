package history

import (
	"context"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/history/record"
)

// Subscription is a Feed for a goroutine: Next blocks until the next
// batch. A small actor in the store's actor system drives the feed and
// hands its batches over one per Next, so that a subscription reads, goes
// live, falls behind and catches up exactly as a feed does. Live batches
// the goroutine has not asked for yet wait in that actor untaken, and
// count against the feed's queue: a subscriber that does not read is
// dropped back to catch-up like any feed. It is used by one goroutine.
type Subscription struct {
	h        *Handle
	filter   record.Filter
	cursor   record.Cursor // after the last batch Next returned
	pageSize int
	live     atomic.Bool // the feed is live (set by the actor)

	pid     *actor.PID // the actor, spawned at the first Next
	cancel  context.CancelFunc
	replies chan nextReply
	waiting bool // a Next request is out: its answer is the next reply
}

// Subscribe starts a subscription. It reads nothing until Next is called.
func (h *Handle) Subscribe(filter record.Filter, from record.From) *Subscription {
	return &Subscription{h: h, filter: filter, cursor: h.start(from), replies: make(chan nextReply, 1)}
}

// SetPageSize sets how many records one catch-up read asks for (see
// Feed.SetPageSize). Call it before the first Next.
func (s *Subscription) SetPageSize(n int) { s.pageSize = n }

// Cursor returns the position after the last batch Next returned.
func (s *Subscription) Cursor() record.Cursor { return s.cursor }

// Live reports whether the subscription has caught up and receives
// committed records straight from the store.
func (s *Subscription) Live() bool { return s.live.Load() }

// Next returns the next batch of records, waiting while there is none. A
// Next that returns for its ctx leaves its request out: the next Next
// gets its answer, so nothing is lost or read twice.
func (s *Subscription) Next(ctx context.Context) (record.Batch, error) {
	if err := ctx.Err(); err != nil {
		return record.Batch{}, err
	}
	system := s.h.system
	if system.IsStopped() {
		return record.Batch{}, ErrStoreStopped
	}
	if s.pid == nil {
		rctx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		a := &subscriber{s: s, ctx: rctx}
		s.pid = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
	}
	if !s.waiting {
		s.waiting = true
		system.Root.Send(s.pid, &nextRequest{})
	}
	select {
	case r := <-s.replies:
		s.waiting = false
		if r.err == nil {
			s.cursor = r.batch.Cursor
		}
		return r.batch, r.err
	case <-ctx.Done():
		return record.Batch{}, ctx.Err()
	}
}

// Close ends the subscription: its actor closes the feed and stops once
// the store has let go of it (so that nothing is sent to it after).
func (s *Subscription) Close() {
	if s.pid != nil {
		s.cancel()
		s.h.system.Root.Send(s.pid, &closeRequest{})
		s.pid = nil
	}
}

type (
	closeRequest struct{}
	nextRequest  struct{}
	nextReply    struct {
		batch record.Batch
		err   error
	}
)

// subscriber is a Subscription's actor: it owns the feed, reads catch-up
// pages in its Receive and answers each nextRequest with one batch.
type subscriber struct {
	s     *Subscription
	ctx   context.Context // the subscription's reads; cancelled by Close
	feed  *Feed
	asked bool        // a nextRequest waits for its batch
	stash []*Delivery // live batches not asked for yet, untaken
	acks  int         // closing: unsubscriptions the store has not acknowledged
	quit  func()      // closing: cancels the stop at the writer's change
}

func (a *subscriber) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.feed = &Feed{h: a.s.h, filter: a.s.filter, cursor: a.s.cursor, pageSize: a.s.pageSize,
			system: c.ActorSystem(), target: c.Self()}
	case *nextRequest:
		a.asked = true
		for a.asked && len(a.stash) > 0 {
			d := a.stash[0]
			a.stash = a.stash[1:]
			a.take(d)
		}
		if a.asked {
			a.pull()
		}
	case *Delivery:
		if m.kind == deliveryLive && !a.asked {
			a.stash = append(a.stash, m)
			return
		}
		a.take(m)
	case *closeRequest:
		a.stash = nil
		if a.acks = a.feed.close(c.Self()); a.acks == 0 {
			c.Stop(c.Self())
			return
		}
		// Should the store's writer change meanwhile, its acks never come.
		system, self := c.ActorSystem(), c.Self()
		a.quit = a.s.h.store.run.onChange(func() { system.Root.Stop(self) })
	case *unsubscribed:
		if a.acks--; a.acks == 0 {
			c.Stop(c.Self())
		}
	case *actor.Stopping:
		a.feed.Close()
		if a.quit != nil {
			a.quit()
		}
	}
	a.s.live.Store(a.feed.Live())
}

// take hands a delivery to the feed and answers with what it gives.
func (a *subscriber) take(d *Delivery) {
	b, ok, again := a.feed.Take(d)
	switch {
	case ok && a.asked:
		a.reply(b, nil)
	case again && a.asked:
		a.pull()
	}
}

// pull reads the next catch-up page, or waits (the feed goes live).
func (a *subscriber) pull() {
	b, ok, err := a.feed.Next(a.ctx)
	switch {
	case err != nil:
		a.reply(record.Batch{}, err)
	case ok:
		a.reply(b, nil)
	}
}

func (a *subscriber) reply(b record.Batch, err error) {
	a.asked = false
	a.s.replies <- nextReply{batch: b, err: err}
}
