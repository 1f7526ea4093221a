package conn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/streaming/wire"
)

// Errors of SendQueue.push.
var (
	errQueueFull   = errors.New("send queue full")
	errQueueClosed = errors.New("connection closed")
)

// SendQueue is a connection's bounded queue of frames waiting for its
// writer: at most maxFrames frames and maxBytes bytes (a single frame larger
// than maxBytes is let in when the queue is empty). Producers either wait
// for room, bounded by a timeout, or give up at once; the writer never
// waits for a producer.
type SendQueue struct {
	mu     sync.Mutex
	frames []queued
	bytes  int64
	// budget is the server's account of the bytes queued on every
	// connection (nil: none); a frame counts from push until it is written
	// (done) or dropped (close).
	budget    *Budget
	maxFrames int
	maxBytes  int64
	closed    bool
	// held: frames wait for room in the connection actor's overflow, and
	// no stream may queue a batch through its Outlet ahead of them.
	held  bool
	ready chan struct{} // signalled when a frame is added
	// space, while a producer waits for room (nil when none does), is
	// closed when room is made.
	space chan struct{}
	// roomWanted is set by the connection actor while frames wait for
	// room: the writer tells it when it takes one.
	roomWanted atomic.Bool
	// onBudgetCut tells the connection actor that the budget cut it off
	// (its queue is closed already); set before the queue is shared.
	onBudgetCut func()
	// writing is when the writer last made progress on the frame it is
	// writing: when it took it, or handed the socket a part of it
	// (progressed; unix nanoseconds; 0 while it writes none). A client
	// that does not read holds its writer in one write for good; one that
	// reads, even slowly, lets it on.
	writing atomic.Int64
	// written is the bytes of the frames the writer is done with: what
	// the client took (the budget spares a client that took much).
	written atomic.Int64
	// inWrite is the budget's account of that frame (its bytes), taken
	// back once: by done, or by a budget cut (cutOverBudget), which ends
	// the stuck write soon after.
	inWrite atomic.Int64
}

// HasRoom reports whether a small frame would join the queue now.
func (q *SendQueue) HasRoom() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.closed && (len(q.frames) == 0 || len(q.frames) < q.maxFrames && q.bytes < q.maxBytes)
}

// isClosed reports whether the queue takes no more frames.
func (q *SendQueue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// queued is a frame in the queue; pooled frames go back to framePool once
// written. After a final frame the writer has the connection closed.
type queued struct {
	b      []byte
	pooled bool
	final  bool
	// parts, when set, is the frame instead of b: written in parts around
	// the records' shared JSON; n is its length.
	parts *wire.FrameParts
	n     int
}

// size is the frame's length, as the queue and the budget count it.
func (f *queued) size() int {
	if f.parts != nil {
		return f.n
	}
	return len(f.b)
}

func newSendQueue(maxFrames int, maxBytes int64) *SendQueue {
	return &SendQueue{maxFrames: maxFrames, maxBytes: maxBytes, ready: make(chan struct{}, 1)}
}

// done ends the account of a frame taken with pop: it was written (or the
// write failed).
func (q *SendQueue) done(f queued) {
	q.writing.Store(0)
	q.written.Add(int64(f.size()))
	if n := q.inWrite.Swap(0); n > 0 && q.budget != nil {
		q.budget.release(n)
	}
}

// pending returns the bytes queued and not yet taken by the writer.
func (q *SendQueue) pending() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}

// fits reports whether a frame of n bytes may join the queue (q.mu held).
func (q *SendQueue) fits(n int) bool {
	if len(q.frames) == 0 {
		return true
	}
	return len(q.frames) < q.maxFrames && q.bytes+int64(n) <= q.maxBytes
}

// tryPush adds a frame if there is room.
func (q *SendQueue) tryPush(frame []byte, pooled bool) error {
	return q.tryPushFrame(queued{b: frame, pooled: pooled})
}

// tryPushFrame adds a frame if there is room.
func (q *SendQueue) tryPushFrame(f queued) error {
	n := f.size()
	q.reserve(n)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		q.unreserve(n)
		return errQueueClosed
	}
	if !q.fits(n) {
		q.unreserve(n)
		return errQueueFull
	}
	q.add(f)
	return nil
}

// reserve and unreserve account a frame in the server's budget.
func (q *SendQueue) reserve(n int) {
	if q.budget != nil {
		q.budget.reserve(int64(n))
	}
}

func (q *SendQueue) unreserve(n int) {
	if q.budget != nil {
		q.budget.release(int64(n))
	}
}

func (q *SendQueue) add(f queued) {
	q.frames = append(q.frames, f)
	q.bytes += int64(f.size())
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// push adds a frame, waiting up to timeout for room: errQueueFull when the
// wait times out, errQueueClosed when the connection ends, ctx's error when
// ctx ends first.
func (q *SendQueue) push(ctx context.Context, frame []byte, pooled bool, timeout time.Duration) (err error) {
	q.reserve(len(frame))
	defer func() {
		if err != nil {
			q.unreserve(len(frame))
		}
	}()
	var timer *time.Timer
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return errQueueClosed
		}
		if q.fits(len(frame)) {
			q.add(queued{b: frame, pooled: pooled})
			q.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return nil
		}
		if q.space == nil {
			q.space = make(chan struct{})
		}
		space := q.space
		q.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(timeout)
			defer timer.Stop()
		}
		select {
		case <-space:
		case <-timer.C:
			return errQueueFull
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// progressed notes that the writer handed the socket a part of the frame
// it is writing (writeParts), unless it is done with it meanwhile.
func (q *SendQueue) progressed() {
	if w := q.writing.Load(); w != 0 {
		q.writing.CompareAndSwap(w, time.Now().UnixNano())
	}
}

// idle is how long the writer made no progress on the frame it writes (0
// when it writes none).
func (q *SendQueue) idle() time.Duration {
	if since := q.writing.Load(); since != 0 {
		return time.Duration(max(1, time.Now().UnixNano()-since))
	}
	return 0
}

// pop takes the oldest frame, waiting for one until done is closed.
func (q *SendQueue) pop(done <-chan struct{}) (queued, bool) {
	for {
		q.mu.Lock()
		if len(q.frames) > 0 {
			f := q.frames[0]
			q.frames[0] = queued{}
			q.frames = q.frames[1:]
			if len(q.frames) == 0 {
				q.frames = nil
			}
			q.bytes -= int64(f.size())
			q.inWrite.Store(int64(f.size()))
			q.writing.Store(time.Now().UnixNano())
			if q.space != nil {
				close(q.space)
				q.space = nil
			}
			q.mu.Unlock()
			return f, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-done:
			return queued{}, false
		}
	}
}

// take is pop for a writer: taking a frame makes room, so it also tells
// the connection actor pid when the actor waits for some (roomWanted).
func (q *SendQueue) take(done <-chan struct{}, sys *actor.ActorSystem, pid *actor.PID) (queued, bool) {
	f, ok := q.pop(done)
	if ok && q.roomWanted.CompareAndSwap(true, false) {
		wire.Tell(sys, pid, &room{})
	}
	return f, ok
}

// close refuses further frames, drops the queued ones and wakes waiters.
func (q *SendQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	if q.budget != nil {
		q.budget.release(q.bytes)
	}
	q.frames, q.bytes = nil, 0
	if q.space != nil {
		close(q.space)
		q.space = nil
	}
}

// len returns the number of queued frames.
func (q *SendQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.frames)
}
