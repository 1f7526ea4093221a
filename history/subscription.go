package history

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/history/record"
)

// Handle is the read side of the history store: subscriptions and reads
// for the rest of the program. Reads go to the backend concurrently; only
// going live talks to the store actor.
type Handle struct {
	store   *Store
	system  *actor.ActorSystem
	pid     *actor.PID
	backend Backend
	nextID  atomic.Uint64
	// PageSize is how many records a catch-up read asks for.
	PageSize int
}

// NewHandle returns the handle of a spawned store.
func NewHandle(store *Store, system *actor.ActorSystem, pid *actor.PID) *Handle {
	return &Handle{store: store, system: system, pid: pid, backend: store.backend, PageSize: 1000}
}

// Head returns the newest committed seq.
func (h *Handle) Head() int64 { return h.store.stats.Head.Load() }

// Stats returns the store's counters.
func (h *Handle) Stats() *StoreStats { return h.store.stats }

// ErrStoreStopped is returned by a subscription once the store has stopped.
var ErrStoreStopped = errors.New("history store stopped")

// Subscribe starts a subscription. It reads nothing until Next is called.
func (h *Handle) Subscribe(filter record.Filter, from record.From) *Subscription {
	s := &Subscription{h: h, filter: filter}
	switch from.Kind {
	case record.FromOrigin:
		head := h.Head()
		if head > 0 {
			s.cursor = record.Cursor{Snapshot: head}
		}
	case record.FromTip:
		s.cursor = record.Cursor{Seq: h.Head()}
	case record.FromCursor:
		s.cursor = from.Cursor
	}
	return s
}

// Subscription delivers matching records in seq order: it catches up from
// the backend, then receives committed records live from the store, and goes
// back to catching up whenever it falls behind. It is used by one goroutine.
type Subscription struct {
	h        *Handle
	filter   record.Filter
	cursor   record.Cursor
	live     *liveSub
	pageSize int // 0: the handle's PageSize
}

// SetPageSize sets how many records one catch-up read of this subscription
// asks for (at most MaxListLimit). A consumer that forms batches of n
// records reads pages of about n, so that many subscriptions catching up at
// once hold little memory each.
func (s *Subscription) SetPageSize(n int) { s.pageSize = n }

// Cursor returns the position after the last delivered batch.
func (s *Subscription) Cursor() record.Cursor { return s.cursor }

// Live reports whether the subscription has caught up and receives
// committed records straight from the store.
func (s *Subscription) Live() bool { return s.live != nil }

// Next returns the next batch of records, waiting while there is none.
func (s *Subscription) Next(ctx context.Context) (record.Batch, error) {
	for {
		if err := ctx.Err(); err != nil {
			return record.Batch{}, err
		}
		if s.live != nil {
			select {
			case lb := <-s.live.ch:
				s.cursor = record.Cursor{Seq: lb.records[len(lb.records)-1].Seq}
				return record.Batch{Records: lb.records, Cursor: s.cursor, Live: true}, nil
			case <-s.live.dropped:
				// Fell behind (or the store stopped): catch up from the cursor.
				s.live = nil
				select {
				case <-s.h.store.done:
					return record.Batch{}, ErrStoreStopped
				default:
				}
				continue
			case <-ctx.Done():
				return record.Batch{}, ctx.Err()
			}
		}
		b, err := s.catchUp(ctx)
		if err != nil || len(b.Records) > 0 {
			return b, err
		}
		if err := s.goLive(ctx); err != nil {
			return record.Batch{}, err
		}
	}
}

// catchUp reads one page from the backend. An empty batch means the cursor
// has reached the committed head.
func (s *Subscription) catchUp(ctx context.Context) (record.Batch, error) {
	head := s.h.Head()
	size := s.h.PageSize
	if s.pageSize > 0 {
		size = s.pageSize
	}
	p := &record.RecordListParams{Filter: s.filter, After: s.cursor.Seq, Limit: min(max(size, 1), record.MaxListLimit)}
	if s.cursor.Snapshot > 0 {
		p.Mode, p.Snapshot = record.ModeSnapshot, s.cursor.Snapshot
	} else {
		if s.cursor.Seq >= head {
			return record.Batch{}, nil
		}
		p.UpTo = head
	}
	recs, err := s.h.backend.RecordList(ctx, p)
	if err != nil {
		return record.Batch{}, err
	}
	switch {
	case len(recs) == p.Limit:
		s.cursor.Seq = recs[len(recs)-1].Seq
	case s.cursor.Snapshot > 0:
		// The snapshot is complete: continue with the log after it.
		s.cursor = record.Cursor{Seq: s.cursor.Snapshot}
	default:
		s.cursor.Seq = head
	}
	return record.Batch{Records: recs, Cursor: s.cursor}, nil
}

// goLive asks the store to deliver records committed after the cursor. It
// is refused when the store has committed more since: then catch up again.
func (s *Subscription) goLive(ctx context.Context) error {
	if s.cursor.Snapshot > 0 {
		return nil
	}
	sub := &liveSub{id: s.h.nextID.Add(1), filter: s.filter,
		ch: make(chan liveBatch, s.h.store.cfg.LiveQueue), dropped: make(chan struct{})}
	fut := s.h.system.Root.RequestFuture(s.h.pid, &goLiveRequest{sub: sub, cursor: s.cursor.Seq}, 10*time.Second)
	res, err := fut.Result()
	if err != nil {
		select {
		case <-s.h.store.done:
			return ErrStoreStopped
		default:
		}
		if errors.Is(err, actor.ErrTimeout) {
			// The store is busy committing a backlog; keep catching up and
			// ask again. A request that is answered late finds a cursor
			// behind the head by then and is refused, so nothing is lost.
			return ctx.Err()
		}
		return fmt.Errorf("going live: %w", err)
	}
	if r, ok := res.(*goLiveResponse); ok && r.accepted {
		s.live = sub
	}
	return ctx.Err()
}

// Close ends the subscription.
func (s *Subscription) Close() {
	if s.live != nil {
		s.h.system.Root.Send(s.h.pid, &unsubscribe{id: s.live.id})
		s.live = nil
	}
}

// Credits is what the pipeline sink needs from actors.Credits.
type Credits interface {
	Acquire(ctx context.Context) error
	Release(n int)
}

// PipelineSink hands the follower's events to the processor actor. Each
// event takes a credit, returned when the store has committed it, so the
// events in flight between the node's socket and the database are bounded.
type PipelineSink struct {
	Root      *actor.RootContext
	Processor *actor.PID
	Credits   Credits
}

// Deliver implements chainsync.Sink.
func (p *PipelineSink) Deliver(ctx context.Context, ev classify.Event) error {
	if err := p.Credits.Acquire(ctx); err != nil {
		return err
	}
	var once atomic.Bool
	p.Root.Send(p.Processor, &ChainEvent{Event: ev, Release: func() {
		if once.CompareAndSwap(false, true) {
			p.Credits.Release(1)
		}
	}})
	return nil
}
