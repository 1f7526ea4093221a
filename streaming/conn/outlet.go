package conn

import "github.com/marlowe-follower/follower/streaming/wire"

// Outlet is one subscription's way into its connection's send queue (the
// wire.Queue its stream holds). Through it the stream reads whether the
// queue has room and, once the connection actor has opened it, queues its
// batch frames itself (Offer): a commit pushed to a subscriber at the tip is
// one queued frame of shared bytes, with no message to the connection
// actor. The actor opens the outlet once the subscription's first frame
// (subscribed) is in the queue, and closes it before it queues the
// subscription's last one (unsubscribed, lease lost). Both happen under the
// queue's lock, as Offer does, so the frames the actor queues after
// closing it come after every batch the stream queued through it.
//
// An offer is refused while the outlet is closed, the queue is closed or
// full, or frames wait for room in it (held: the actor's overflow, whose
// order an offer must not jump); the stream then sends the batch to the
// actor (wire.Deliver), which queues it or lets it wait for room.
type Outlet struct {
	q    *SendQueue
	open bool // guarded by q.mu
}

// newOutlet returns a closed outlet into the queue.
func (q *SendQueue) newOutlet() *Outlet { return &Outlet{q: q} }

// HasRoom reports whether a small frame would join the queue now.
func (o *Outlet) HasRoom() bool { return o.q.HasRoom() }

// Offer queues a batch frame when the outlet is open and the queue takes
// it at once; false otherwise.
func (o *Outlet) Offer(parts *wire.FrameParts) bool {
	q, n := o.q, parts.Size()
	q.mu.Lock()
	ok := o.takes(n)
	q.mu.Unlock()
	if !ok {
		return false // refused before the budget is asked (it may cut others)
	}
	q.reserve(n)
	q.mu.Lock()
	defer q.mu.Unlock()
	if !o.takes(n) {
		q.unreserve(n)
		return false
	}
	q.add(queued{parts: parts, n: n})
	return true
}

// takes reports whether an offer of n bytes would be queued (q.mu held).
func (o *Outlet) takes(n int) bool {
	q := o.q
	return o.open && !q.closed && !q.held && q.fits(n)
}

// setOpen opens or closes the outlet.
func (o *Outlet) setOpen(open bool) {
	o.q.mu.Lock()
	o.open = open
	o.q.mu.Unlock()
}

// hold refuses offers while frames wait for room in the queue (held), and
// takes them again once none does.
func (q *SendQueue) hold(held bool) {
	q.mu.Lock()
	q.held = held
	q.mu.Unlock()
}
