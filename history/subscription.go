package history

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/history/record"
)

// Handle is the read side of the history store: subscriptions and reads
// for the rest of the program. Reads go to the backend concurrently; only
// going live talks to the store actor, whichever incarnation runs.
type Handle struct {
	store   *Store
	backend Backend
	// PageSize is how many records a catch-up read asks for.
	PageSize int
}

// NewHandle returns the handle of a store. pid, when set, is its spawned
// actor (the store also registers each incarnation itself once started).
func NewHandle(store *Store, system *actor.ActorSystem, pid *actor.PID) *Handle {
	if pid != nil {
		store.run.spawned(system, pid)
	}
	return &Handle{store: store, backend: store.backend, PageSize: 1000}
}

// Head returns the newest committed seq this process delivers from: the
// writer's head in the writer's process, a reader's own head in a reader
// (history.Mirror), which follows the writer's by a moment.
func (h *Handle) Head() int64 { return h.store.stats.Head.Load() }

// CommittedHead returns the newest seq known to be committed: Head in the
// writer's process; in a reader, the writer's head as last noticed, when
// that is further. A cursor up to it is valid here: a subscription from a
// cursor this reader has not reached yet (a client that moved from a
// reader further ahead) waits until it has.
func (h *Handle) CommittedHead() int64 {
	head := h.Head()
	if k := h.store.known; k != nil {
		head = max(head, k())
	}
	return head
}

// aheadWait is how long a subscription whose cursor is beyond this
// process's head (a reader behind the writer) waits before looking again.
const aheadWait = 20 * time.Millisecond

// ahead reports whether a cursor is beyond this process's head.
func (h *Handle) ahead(c record.Cursor) bool { return max(c.Seq, c.Snapshot) > h.Head() }

// Stats returns the store's counters.
func (h *Handle) Stats() *StoreStats { return h.store.stats }

// ErrStoreStopped is returned by a subscription once the store has stopped
// for good (not while a supervisor restarts it).
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
// back to catching up whenever it falls behind. It is used by one goroutine
// (Next blocks); an actor uses a Feed, the same subscription delivered to
// its mailbox.
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
				// Fell behind (or the store stopped): catch up from the
				// cursor; going live again finds out whether the store
				// stopped for good.
				s.live = nil
				if _, _, stopped, _ := s.h.store.run.state(); stopped {
					return record.Batch{}, ErrStoreStopped
				}
				continue
			case <-ctx.Done():
				return record.Batch{}, ctx.Err()
			}
		}
		if s.h.ahead(s.cursor) {
			// A reader behind the cursor's writer: nothing to read or
			// go live at yet (a snapshot beyond the head would read
			// records not there).
			t := time.NewTimer(aheadWait)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
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

// goLiveTimeout bounds the wait for the store's answer: a store busy
// committing a backlog is asked again after more catching up. An answer
// that comes late finds a cursor behind the head by then and is a refusal,
// so nothing is lost.
const goLiveTimeout = 10 * time.Second

// goLive asks the store to deliver records committed after the cursor. It
// is refused when the store has committed more since: then catch up again.
// While no store runs (a supervisor restarting it) it waits for the next.
func (s *Subscription) goLive(ctx context.Context) error {
	if s.cursor.Snapshot > 0 {
		return nil
	}
	for {
		system, pid, stopped, changed := s.h.store.run.state()
		if stopped {
			return ErrStoreStopped
		}
		if pid == nil {
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		sub := s.h.newLiveSub(s.filter)
		reply := make(chan goLiveResponse, 1)
		system.Root.Send(pid, &goLiveRequest{sub: sub, cursor: s.cursor.Seq, reply: reply})
		timeout := time.NewTimer(goLiveTimeout)
		select {
		case r := <-reply:
			timeout.Stop()
			if r.accepted {
				s.live = sub
			}
			return nil
		case <-changed:
			// The writer stopped, or another started, maybe before it
			// answered.
			timeout.Stop()
			select {
			case r := <-reply:
				if r.accepted {
					s.live = sub
				}
			default:
			}
			return nil
		case <-timeout.C:
			return ctx.Err()
		case <-ctx.Done():
			timeout.Stop()
			return ctx.Err()
		}
	}
}

// Close ends the subscription.
func (s *Subscription) Close() {
	if s.live != nil {
		s.h.store.run.send(&unsubscribe{id: s.live.id})
		s.live = nil
	}
}

// newLiveSub returns a live subscription for a Subscription (target nil)
// or a Feed.
func (h *Handle) newLiveSub(filter record.Filter) *liveSub {
	return &liveSub{id: h.store.run.nextID.Add(1), filter: filter,
		ch: make(chan liveBatch, h.store.cfg.LiveQueue), dropped: make(chan struct{}), capacity: int64(h.store.cfg.LiveQueue)}
}

// liveSub is a subscription that receives committed records from the
// store: through a bounded channel (a Subscription), or as messages to an
// actor (a Feed), at most capacity of them not yet taken. Either way a
// subscriber whose queue is full is dropped back to catch-up.
type liveSub struct {
	id       uint64
	filter   record.Filter
	ch       chan liveBatch
	dropped  chan struct{}
	dropOnce sync.Once

	// A Feed's: its actor, and the batches sent to it and not yet taken.
	feed     *Feed
	target   *actor.PID
	queued   atomic.Int64
	capacity int64
}

type liveBatch struct {
	records []record.Record
	head    int64
}

// push hands a live batch over; false when the subscriber's queue is full.
func (l *liveSub) push(system *actor.ActorSystem, lb liveBatch) bool {
	if l.target == nil {
		select {
		case l.ch <- lb:
			return true
		default:
			return false
		}
	}
	if l.queued.Load() >= l.capacity {
		return false
	}
	l.queued.Add(1)
	system.Root.Send(l.target, &Delivery{feed: l.feed, sub: l, kind: deliveryLive, batch: lb.records})
	return true
}

// drop sends the subscriber back to catching up.
func (l *liveSub) drop(system *actor.ActorSystem) {
	l.dropOnce.Do(func() {
		close(l.dropped)
		if l.target != nil {
			system.Root.Send(l.target, &Delivery{feed: l.feed, sub: l, kind: deliveryDropped})
		}
	})
}

// answer tells the subscriber whether the store took it live.
func (l *liveSub) answer(system *actor.ActorSystem, reply chan goLiveResponse, r goLiveResponse) {
	if reply != nil {
		reply <- r
		return
	}
	kind := deliveryRefused
	if r.accepted {
		kind = deliveryAccepted
	}
	system.Root.Send(l.target, &Delivery{feed: l.feed, sub: l, kind: kind})
}

// presence is where the store's actor runs, across its incarnations:
// subscriptions find the running writer here and wait here for the next
// one while a supervisor restarts it.
type presence struct {
	mu       sync.Mutex
	system   *actor.ActorSystem
	pid      *actor.PID
	restart  bool              // the running writer's stop is a restart
	stopped  bool              // stopped for good: no writer follows
	changed  chan struct{}     // closed, and replaced, at every change
	notify   map[uint64]func() // called once at the next change (Feeds)
	notifyID uint64
	nextID   atomic.Uint64
}

// spawned records a writer spawned but maybe not started yet.
func (p *presence) spawned(system *actor.ActorSystem, pid *actor.PID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pid == nil {
		p.system, p.pid = system, pid
	}
}

// attach records the writer that started.
func (p *presence) attach(system *actor.ActorSystem, pid *actor.PID) {
	p.mu.Lock()
	p.system, p.pid, p.restart, p.stopped = system, pid, false, false
	fns := p.bump()
	p.mu.Unlock()
	run(fns)
}

// detach records that the writer pid stopped: for good unless a restart
// was announced.
func (p *presence) detach(pid *actor.PID) {
	p.mu.Lock()
	if p.pid != nil && !p.pid.Equal(pid) {
		p.mu.Unlock()
		return
	}
	p.pid = nil
	p.stopped = !p.restart
	fns := p.bump()
	p.mu.Unlock()
	run(fns)
}

func (p *presence) retire() {
	p.mu.Lock()
	if p.stopped && p.pid == nil {
		p.mu.Unlock()
		return
	}
	p.pid, p.restart, p.stopped = nil, false, true
	fns := p.bump()
	p.mu.Unlock()
	run(fns)
}

func (p *presence) expectRestart() {
	p.mu.Lock()
	p.restart = true
	p.mu.Unlock()
}

// bump signals a change; the caller runs the returned notifications
// after unlocking.
func (p *presence) bump() []func() {
	close(p.changed)
	p.changed = make(chan struct{})
	fns := make([]func(), 0, len(p.notify))
	for _, f := range p.notify {
		fns = append(fns, f)
	}
	p.notify = nil
	return fns
}

func run(fns []func()) {
	for _, f := range fns {
		f()
	}
}

// state returns the running writer (nil between incarnations), whether
// the store stopped for good, and a channel closed at the next change.
func (p *presence) state() (*actor.ActorSystem, *actor.PID, bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.system, p.pid, p.stopped, p.changed
}

// onChange calls f once at the next change, unless the returned cancel
// is called first.
func (p *presence) onChange(f func()) (cancel func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.notify == nil {
		p.notify = map[uint64]func(){}
	}
	p.notifyID++
	id := p.notifyID
	p.notify[id] = f
	return func() {
		p.mu.Lock()
		delete(p.notify, id)
		p.mu.Unlock()
	}
}

// send sends msg to the running writer, if any.
func (p *presence) send(msg any) {
	if system, pid, _, _ := p.state(); pid != nil {
		system.Root.Send(pid, msg)
	}
}
