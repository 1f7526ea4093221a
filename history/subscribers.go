package history

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
)

// Messages of a store's subscriber registry (the writer's and the
// mirror's).
type (
	// goLiveRequest asks to receive committed records live from cursor on;
	// the answer goes to the feed's actor.
	// A cursor behind the head is taken when the registry's tail holds
	// what the feed missed, at most max records of it (0: any number).
	goLiveRequest struct {
		sub    *liveSub
		cursor int64
		max    int
	}
	// unsubscribe ends a registration; ack, when set, is told once it is
	// gone (unsubscribed): every delivery to it was sent before.
	unsubscribe struct {
		id  uint64
		ack *actor.PID
	}
	unsubscribed struct{}
)

// subscribers is the registry of a store's live feeds, the one the
// writer's Store and the reader's Mirror both deliver through: it takes
// go-live requests at the store's head, or behind it from its tail, and
// fans committed records out. A feed whose queue is full is dropped back
// to catch-up: the store never waits for one. It is used from the store's
// actor only.
type subscribers struct {
	system *actor.ActorSystem
	stats  *StoreStats
	live   map[uint64]*liveSub
	tail   tail
}

// newSubscribers starts a registry at head, its tail holding at most
// tailRecords records.
func newSubscribers(system *actor.ActorSystem, stats *StoreStats, tailRecords int, head int64) subscribers {
	stats.LiveFrom.Store(head)
	return subscribers{system: system, stats: stats, live: map[uint64]*liveSub{}, tail: tail{limit: tailRecords}}
}

// receive handles the registry's messages at the store's head; false for
// any other message.
func (r *subscribers) receive(msg any, head int64) bool {
	switch m := msg.(type) {
	case *goLiveRequest:
		r.goLive(m, head)
	case *unsubscribe:
		delete(r.live, m.id)
		r.count()
		if m.ack != nil {
			r.system.Root.Send(m.ack, &unsubscribed{})
		}
	default:
		return false
	}
	return true
}

// goLive answers a go-live request. At the head the feed goes live; a
// few commits behind it, it goes live with the records it missed from the
// tail as its first batch (after the answer, so that the feed takes it);
// further behind, it catches up first.
func (r *subscribers) goLive(m *goLiveRequest, head int64) {
	var missed []record.Record
	accepted := m.cursor == head
	if !accepted {
		missed, accepted = r.tail.after(m.cursor, head, &m.sub.filter, m.max)
		if accepted {
			r.stats.LiveReplayed.Add(1)
		} else {
			r.stats.LiveRefused.Add(1)
		}
	}
	if accepted {
		r.live[m.sub.id] = m.sub
		r.count()
	}
	m.sub.answer(r.system, accepted)
	if len(missed) > 0 {
		m.sub.push(r.system, missed)
	}
}

// fanOut pushes committed records to the live feeds, each the records its
// filter matches (index gives a contract's index entry; nil when no live
// filter needs one), and keeps them in the tail.
func (r *subscribers) fanOut(records []record.Record, index func(*chain.TxOutRef) *record.ContractIndex) {
	if len(records) == 0 {
		return
	}
	r.tail.add(records, index)
	r.stats.LiveFrom.Store(r.tail.from(records[len(records)-1].Seq))
	if len(r.live) == 0 {
		return
	}
	for id, sub := range r.live {
		out := matching(records, &sub.filter, index)
		if len(out) == 0 {
			continue
		}
		if !sub.push(r.system, out) {
			r.stats.LiveDropped.Add(1)
			sub.drop(r.system)
			delete(r.live, id)
		}
	}
	r.count()
}

// matching returns the records the filter matches. When it matches them all
// (a feed of every record: most at the tip) that is records itself, shared
// by every such feed without a copy: the records of a live batch are read
// only, and the slice's capacity ends with it, so an append copies.
func matching(records []record.Record, f *record.Filter, index func(*chain.TxOutRef) *record.ContractIndex) []record.Record {
	for i := range records {
		if f.Matches(&records[i], lookup(index, records[i].Contract)) {
			continue
		}
		out := append([]record.Record(nil), records[:i]...)
		for j := i + 1; j < len(records); j++ {
			if f.Matches(&records[j], lookup(index, records[j].Contract)) {
				out = append(out, records[j])
			}
		}
		return out
	}
	return records[:len(records):len(records)]
}

// dropAll sends every live feed back to catch up.
func (r *subscribers) dropAll() {
	for id, sub := range r.live {
		sub.drop(r.system)
		delete(r.live, id)
	}
	r.tail.reset()
	r.count()
}

// needIndex reports whether a live feed's filter reads the contract index.
func (r *subscribers) needIndex() bool {
	for _, sub := range r.live {
		if sub.filter.NeedsIndex() {
			return true
		}
	}
	return false
}

func (r *subscribers) count() { r.stats.LiveSubscribers.Store(int64(len(r.live))) }

// liveSub is a feed's registration with the store: committed records go
// to its actor as messages, at most capacity of them not yet taken.
type liveSub struct {
	id       uint64
	filter   record.Filter
	feed     *Feed
	target   *actor.PID
	queued   atomic.Int64 // live batches sent and not yet taken
	capacity int64
	dropOnce sync.Once
}

// push hands a live batch over; false when the feed's queue is full.
func (l *liveSub) push(system *actor.ActorSystem, batch []record.Record) bool {
	if l.queued.Load() >= l.capacity {
		return false
	}
	l.queued.Add(1)
	system.Root.Send(l.target, &Delivery{feed: l.feed, sub: l, kind: deliveryLive, batch: batch})
	return true
}

// drop sends the feed back to catching up.
func (l *liveSub) drop(system *actor.ActorSystem) {
	l.dropOnce.Do(func() { system.Root.Send(l.target, &Delivery{feed: l.feed, sub: l, kind: deliveryDropped}) })
}

// answer tells the feed whether the store took it live.
func (l *liveSub) answer(system *actor.ActorSystem, accepted bool) {
	kind := deliveryRefused
	if accepted {
		kind = deliveryAccepted
	}
	system.Root.Send(l.target, &Delivery{feed: l.feed, sub: l, kind: kind})
}
