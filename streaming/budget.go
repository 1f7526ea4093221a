package streaming

import (
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/streaming/protocol"
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
	s     *Server
	limit int64
	used  atomic.Int64
	peak  atomic.Int64
	mu    sync.Mutex // one reservation cuts at a time
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
			c := b.s.largestQueue()
			if c == nil {
				break
			}
			c.overBudget()
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

// largestQueue returns the open connection with the most bytes waiting in
// its send queue, or nil when none has any.
func (s *Server) largestQueue() *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *conn
	var most int64
	for c := range s.conns {
		if c.closing.Load() {
			continue
		}
		if n := c.q.pending(); n > most {
			best, most = c, n
		}
	}
	return best
}

// overBudget cuts off a connection whose queue is the largest when the
// server's queue budget is reached, with a close frame naming the reason.
func (c *conn) overBudget() {
	c.closeOnce.Do(func() {
		c.srv.m.budgetCuts.Inc()
		c.log.Warn("disconnecting the client with the most queued frames: the streaming queue budget is reached",
			zap.String("reason", protocol.CloseMemoryBudget), zap.Int64("queuedBytes", c.q.pending()),
			zap.Int64("budget", c.srv.cfg.QueueBudget))
		c.shutdown(websocket.StatusPolicyViolation, protocol.CloseMemoryBudget)
	})
	// A connection already closing is skipped by largestQueue; its queue
	// was emptied when it began to close.
}
