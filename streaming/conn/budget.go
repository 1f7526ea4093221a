package conn

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// Budget is the server's account of the frames queued on all its
// connections (Config.QueueBudget): bytes reserved before a frame joins a
// send queue and released when the frame is written, fails, or is dropped
// with its queue; the frame a connection's writer is writing counts until
// it is written. A reservation that would take the total above the limit
// first cuts off connections until it fits, those that do not read first:
// the one whose writer has waited longest on a write without progress (the
// client takes no bytes; a slow reader's writer hands the socket a part of
// a large frame now and then), then, among connections whose writers wait
// on none, the one with the most bytes queued (victim). The size of a queue alone does not tell:
// a client that reads but is catching up keeps a full queue, the server
// making frames faster than it reads them. A cut connection's queue and
// the frame in its writer leave the account at once; a write still stuck
// after budgetCloseGrace is ended (the socket closed), which frees the
// frame. Only when nothing is left to cut does a reservation pass the
// limit.
type Budget struct {
	limit int64
	used  atomic.Int64
	peak  atomic.Int64
	mu    sync.Mutex // one reservation cuts at a time

	qmu    sync.Mutex
	queues map[*SendQueue]struct{} // the connections' send queues
}

// budgetCloseGrace is how long a connection the budget cut may take to
// finish the write in progress (a client that reads gets its frames and
// the close frame naming the reason) before the write is ended and the
// socket closed, freeing the frame the client does not take.
const budgetCloseGrace = 100 * time.Millisecond

// reserve accounts n bytes, cutting connections off first when they would
// not fit.
func (b *Budget) reserve(n int64) {
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
			q := b.victim()
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

func (b *Budget) release(n int64) { b.used.Add(-n) }

func (b *Budget) notePeak(v int64) {
	for p := b.peak.Load(); v > p && !b.peak.CompareAndSwap(p, v); p = b.peak.Load() {
	}
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Bytes returns the bytes of frames queued or being written on all
// connections, and the most there were at once since the budget was made.
func (b *Budget) Bytes() (now, peak int64) {
	return b.used.Load(), b.peak.Load()
}

// Join puts q, the send queue of the connection actor pid, in its
// budget's account (a queue without a budget, an event stream's: none); a
// budget cut tells the actor (Cut). Call it before the queue is shared.
func (q *SendQueue) Join(sys *actor.ActorSystem, pid *actor.PID) {
	if q.budget == nil {
		return
	}
	q.onBudgetCut = func() {
		wire.Tell(sys, pid, &Cut{Code: websocket.StatusPolicyViolation, Reason: protocol.CloseMemoryBudget, Why: "budget"})
	}
	q.budget.add(q)
}

// Leave takes q out of its budget's account (its connection stopped).
func (q *SendQueue) Leave() {
	if q.budget != nil {
		q.budget.remove(q)
	}
}

// add and remove register a connection's send queue with the budget.
func (b *Budget) add(q *SendQueue) {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	if b.queues == nil {
		b.queues = map[*SendQueue]struct{}{}
	}
	b.queues[q] = struct{}{}
}

func (b *Budget) remove(q *SendQueue) {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	delete(b.queues, q)
}

// victim returns the open connection to cut first among those holding
// bytes of the account (queued, or in their writer): the one whose writer
// is still writing a frame and made progress on it the longest ago, else
// the one with the most bytes queued; nil when none holds any.
func (b *Budget) victim() *SendQueue {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	var best *SendQueue
	var bestSince, most int64
	for q := range b.queues {
		if q.isClosed() {
			continue
		}
		n := q.pending()
		if n == 0 && q.inWrite.Load() == 0 {
			continue
		}
		since := q.writing.Load()
		switch {
		case best == nil,
			since != 0 && (bestSince == 0 || since < bestSince),
			since == 0 && bestSince == 0 && n > most:
			best, bestSince, most = q, since, n
		}
	}
	return best
}

// cutOverBudget closes the queue (its bytes are released at once, and the
// account of the frame in its writer) and tells its connection actor,
// which closes the connection with a close frame naming the reason and
// ends a write still stuck after budgetCloseGrace.
func (q *SendQueue) cutOverBudget() {
	q.close()
	if n := q.inWrite.Swap(0); n > 0 && q.budget != nil {
		q.budget.release(n)
	}
	if q.onBudgetCut != nil {
		q.onBudgetCut()
	}
}
