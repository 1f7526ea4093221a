package streaming

import (
	"sync"
	"sync/atomic"
)

// queueBudget is the server's account of the frames queued on all its
// connections (Config.QueueBudget): bytes reserved before a frame joins a
// send queue and released when the frame is written, fails, or is dropped
// with its queue. A reservation that would take the total above the limit
// first cuts off the connections with the most bytes waiting in their
// queues, largest first (clients that do not read; one that reads keeps
// its queue short), until it fits. Frames being written count too: what a
// cut connection's writer holds is released when its socket ends, so the
// total may pass the limit by the frames in the writers of connections
// being cut, one per connection at most.
type queueBudget struct {
	limit int64
	used  atomic.Int64
	peak  atomic.Int64
	mu    sync.Mutex // one reservation cuts at a time

	qmu    sync.Mutex
	queues map[*sendQueue]struct{} // the connections' send queues
}

// reserve accounts n bytes, cutting connections off first when they would
// not fit.
func (b *queueBudget) reserve(n int64) {
	for {
		cur := b.used.Load()
		if cur+n <= b.limit {
			if b.used.CompareAndSwap(cur, cur+n) {
				b.notePeak(cur + n)
				return
			}
			continue
		}
		b.mu.Lock()
		cut := false
		for b.used.Load()+n > b.limit {
			q := b.largestQueue()
			if q == nil {
				break
			}
			q.cutOverBudget()
			cut = true
		}
		b.mu.Unlock()
		if !cut && b.used.Load()+n > b.limit {
			// Nothing waits in a queue: what is left is being written.
			b.notePeak(b.used.Add(n))
			return
		}
	}
}

func (b *queueBudget) release(n int64) { b.used.Add(-n) }

func (b *queueBudget) notePeak(v int64) {
	for p := b.peak.Load(); v > p && !b.peak.CompareAndSwap(p, v); p = b.peak.Load() {
	}
}

// QueuedBytes returns the bytes of frames queued or being written on all
// connections, and the most there were at once since the server started:
// what Config.QueueBudget bounds.
func (s *Server) QueuedBytes() (now, peak int64) {
	return s.budget.used.Load(), s.budget.peak.Load()
}

// add and remove register a connection's send queue with the budget.
func (b *queueBudget) add(q *sendQueue) {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	if b.queues == nil {
		b.queues = map[*sendQueue]struct{}{}
	}
	b.queues[q] = struct{}{}
}

func (b *queueBudget) remove(q *sendQueue) {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	delete(b.queues, q)
}

// largestQueue returns the open queue with the most bytes waiting, or nil
// when none has any.
func (b *queueBudget) largestQueue() *sendQueue {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	var best *sendQueue
	var most int64
	for q := range b.queues {
		if q.isClosed() {
			continue
		}
		if n := q.pending(); n > most {
			best, most = q, n
		}
	}
	return best
}

// cut closes the largest queue (its bytes are released at once) and tells
// its connection actor, which closes the connection with a close frame
// naming the reason.
func (q *sendQueue) cutOverBudget() {
	q.close()
	if q.onBudgetCut != nil {
		q.onBudgetCut()
	}
}
