package history

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/history/record"
)

// Feed is the one subscription primitive: matching records in seq order,
// delivered to an actor's mailbox, so that the subscriber's work stays in
// its Receive. It catches up from the backend, then receives committed
// records live from the store, and goes back to catching up whenever it
// falls behind. The actor calls Next, which reads the next catch-up page
// at once or, once the feed has reached the committed head, asks the
// store to go live and returns nothing; from then on the store sends the
// actor *Delivery messages, which it hands to Take: live batches, or the
// word to call Next again (the store refused or dropped the feed, or its
// writer changed). A feed is used by its actor only. A goroutine uses a
// Subscription, which drives a feed for it.
type Feed struct {
	h        *Handle
	filter   record.Filter
	cursor   record.Cursor
	pageSize int // 0: the handle's PageSize
	system   *actor.ActorSystem
	target   *actor.PID
	live     *liveSub // the store delivers to it
	asking   *liveSub // a go-live request not answered yet
	forget   func()   // cancels the asking request's change notification
	closed   bool
}

// Delivery is what the store sends a Feed's actor; pass it to the feed's
// Take (a Delivery of another feed is ignored there). The records of a
// live batch are shared by every feed they match (read only).
type Delivery struct {
	feed  *Feed
	sub   *liveSub
	kind  deliveryKind
	batch []record.Record
}

type deliveryKind int

const (
	deliveryLive     deliveryKind = iota + 1 // committed records
	deliveryAccepted                         // the feed is live
	deliveryRefused                          // the store committed more meanwhile: catch up
	deliveryDropped                          // fell behind, or the writer stopped: catch up
	deliveryChanged                          // the writer changed before it answered: ask again
)

// ErrFeedClosed is Next's error on a closed feed.
var ErrFeedClosed = errors.New("history feed closed")

// Feed starts a feed for the actor target (spawned in system). It reads
// nothing until Next is called.
func (h *Handle) Feed(system *actor.ActorSystem, target *actor.PID, filter record.Filter, from record.From) *Feed {
	return &Feed{h: h, filter: filter, cursor: h.start(from), system: system, target: target}
}

// start returns the cursor a subscription from from starts at.
func (h *Handle) start(from record.From) record.Cursor {
	switch from.Kind {
	case record.FromOrigin:
		if head := h.Head(); head > 0 {
			return record.Cursor{Snapshot: head}
		}
	case record.FromTip:
		return record.Cursor{Seq: h.Head()}
	case record.FromCursor:
		return from.Cursor
	}
	return record.Cursor{}
}

// SetPageSize sets how many records one catch-up read asks for (at most
// record.MaxListLimit). A consumer that forms batches of n records reads
// pages of about n, so that many feeds catching up at once hold little
// memory each.
func (f *Feed) SetPageSize(n int) { f.pageSize = n }

// Cursor returns the position after the last batch returned.
func (f *Feed) Cursor() record.Cursor { return f.cursor }

// Live reports whether the store delivers to the feed.
func (f *Feed) Live() bool { return f.live != nil }

// Waiting reports whether the feed waits for the answer to its go-live
// request (or for the moment to ask again, when its reader is behind the
// writer): Next returns nothing until a Delivery has answered, so an actor
// calls it again only after Take.
func (f *Feed) Waiting() bool { return f.asking != nil }

// Next returns the next catch-up page (ok). It returns ok false when the
// feed is at the committed head: the actor then receives a Delivery. Call
// it from the target's Receive.
func (f *Feed) Next(ctx context.Context) (b record.Batch, ok bool, err error) {
	if f.closed {
		return record.Batch{}, false, ErrFeedClosed
	}
	if f.live != nil || f.asking != nil {
		return record.Batch{}, false, nil
	}
	if f.h.ahead(f.cursor) {
		// A reader behind the cursor's writer: nothing to read or go live
		// at yet (a snapshot beyond the head would read records not
		// there). The actor is told to call Next again shortly.
		ls := f.newLiveSub()
		f.asking = ls
		system, target := f.system, f.target
		time.AfterFunc(aheadWait, func() { system.Root.Send(target, &Delivery{feed: f, sub: ls, kind: deliveryChanged}) })
		return record.Batch{}, false, nil
	}
	for !f.nearHead() {
		b, err := f.catchUp(ctx)
		if err != nil {
			return record.Batch{}, false, err
		}
		if len(b.Records) > 0 {
			return b, true, nil
		}
		if f.cursor.Snapshot == 0 {
			break
		}
	}
	run := &f.h.store.run
	system, pid, stopped := run.state()
	if stopped {
		return record.Batch{}, false, ErrStoreStopped
	}
	ls := f.newLiveSub()
	f.asking = ls
	// Whatever happens to the writer before it answers (it stops, or none
	// runs now and the next one starts), the feed hears of it.
	f.forget = run.onChange(func() { f.system.Root.Send(f.target, &Delivery{feed: f, sub: ls, kind: deliveryChanged}) })
	if pid != nil {
		system.Root.Send(pid, &goLiveRequest{sub: ls, cursor: f.cursor.Seq, max: f.size()})
	}
	return record.Batch{}, false, nil
}

// nearHead reports whether the feed asks to go live without reading
// first: its cursor is in the log (not a snapshot), within a page of the
// head and no further back than the store's tail reaches, so the store
// hands it the records it missed with its answer (or, should the tail
// have moved on meanwhile, sends it back to read).
func (f *Feed) nearHead() bool {
	c := f.cursor.Seq
	return f.cursor.Snapshot == 0 && c >= f.h.store.stats.LiveFrom.Load() && f.h.Head()-c <= int64(f.size())
}

// size is how many records one catch-up read asks for.
func (f *Feed) size() int {
	size := f.h.PageSize
	if f.pageSize > 0 {
		size = f.pageSize
	}
	return min(max(size, 1), record.MaxListLimit)
}

// catchUp reads one page from the backend. An empty batch means the cursor
// has reached the committed head (or, from a snapshot, that the snapshot
// is complete: the cursor moved on to the log after it).
func (f *Feed) catchUp(ctx context.Context) (record.Batch, error) {
	head := f.h.Head()
	p := &record.RecordListParams{Filter: f.filter, After: f.cursor.Seq, Limit: f.size()}
	if f.cursor.Snapshot > 0 {
		p.Mode, p.Snapshot = record.ModeSnapshot, f.cursor.Snapshot
	} else {
		if f.cursor.Seq >= head {
			return record.Batch{}, nil
		}
		p.UpTo = head
	}
	recs, err := f.h.backend.RecordList(ctx, p)
	if err != nil {
		return record.Batch{}, err
	}
	switch {
	case len(recs) == p.Limit:
		f.cursor.Seq = recs[len(recs)-1].Seq
	case f.cursor.Snapshot > 0:
		// The snapshot is complete: continue with the log after it.
		f.cursor = record.Cursor{Seq: f.cursor.Snapshot}
	default:
		f.cursor.Seq = head
	}
	return record.Batch{Records: recs, Cursor: f.cursor}, nil
}

// newLiveSub returns the registration of a go-live request of the feed.
func (f *Feed) newLiveSub() *liveSub {
	q := f.h.store.cfg.LiveQueue
	return &liveSub{id: f.h.store.run.nextID.Add(1), filter: f.filter, feed: f, target: f.target, capacity: int64(q)}
}

// Take handles a Delivery: it returns a live batch (ok), or again when the
// actor is to call Next. Deliveries of another feed, or for a request or a
// live registration the feed has moved past, give neither.
func (f *Feed) Take(d *Delivery) (b record.Batch, ok, again bool) {
	if d.feed != f || f.closed {
		return record.Batch{}, false, false
	}
	switch d.kind {
	case deliveryLive:
		d.sub.queued.Add(-1)
		if d.sub != f.live {
			return record.Batch{}, false, false
		}
		f.cursor = record.Cursor{Seq: d.batch[len(d.batch)-1].Seq}
		return record.Batch{Records: d.batch, Cursor: f.cursor, Live: true}, true, false
	case deliveryAccepted:
		if d.sub == f.asking {
			f.answered()
			f.live = d.sub
		}
	case deliveryRefused, deliveryChanged:
		if d.sub == f.asking {
			f.answered()
			return record.Batch{}, false, true
		}
	case deliveryDropped:
		if d.sub == f.live {
			f.live = nil
			return record.Batch{}, false, true
		}
	}
	return record.Batch{}, false, false
}

// answered ends the wait for the asking request's answer.
func (f *Feed) answered() {
	f.asking = nil
	if f.forget != nil {
		f.forget()
		f.forget = nil
	}
}

// Close ends the feed: the store stops delivering to it.
func (f *Feed) Close() { f.close(nil) }

// close ends the feed and returns how many unsubscriptions the running
// store will acknowledge to ack (none without ack).
func (f *Feed) close(ack *actor.PID) int {
	f.closed = true
	n := 0
	for _, ls := range []*liveSub{f.live, f.asking} {
		if ls != nil && f.h.store.run.send(&unsubscribe{id: ls.id, ack: ack}) && ack != nil {
			n++
		}
	}
	f.live = nil
	f.answered()
	return n
}
