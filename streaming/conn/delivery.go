package conn

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/streaming/wire"
)

// waiting is a frame waiting for room in the send queue.
type waiting struct {
	frame  []byte
	parts  *wire.FrameParts // the frame in parts instead (frame nil)
	pooled bool
	final  bool
	since  time.Time
	// a batch's: its stream is told when it cannot be queued (and, with
	// notify, when it is).
	stream *actor.PID
	number int64
	notify bool
	// opens is the outlet of the subscription whose first frame this is:
	// it opens once the frame is queued.
	opens *Outlet
}

// delivery is what a connection actor (WebSocket or server-sent events)
// keeps of its send queue: the queue its writer drains, and the frames
// waiting for room in it, oldest first; the oldest waits at most wait
// (WriteTimeout), then slow cuts the client off as a slow consumer.
type delivery struct {
	q    *SendQueue
	sys  *actor.ActorSystem
	self *actor.PID
	wait time.Duration
	// maxFrames and maxBytes bound the overflow: as much again as the
	// queue holds.
	maxFrames int
	maxBytes  int64
	slow      func(actor.Context)

	overflow      []waiting
	overflowBytes int64
	overflowTimer *time.Timer
	overflowGen   int
}

func newDelivery(cfg *Config, slow func(actor.Context)) delivery {
	return delivery{q: newSendQueue(cfg.SendQueueFrames, cfg.SendQueueBytes), wait: cfg.WriteTimeout,
		maxFrames: cfg.SendQueueFrames, maxBytes: cfg.SendQueueBytes, slow: slow}
}

// enqueue puts a frame in the send queue, or behind the frames waiting
// for room in it.
func (c *delivery) enqueue(ac actor.Context, w waiting) {
	if len(c.overflow) == 0 {
		switch err := c.q.tryPushFrame(w.queued()); {
		case err == nil:
			c.queued(w)
			return
		case errors.Is(err, errQueueClosed):
			c.refused(w)
			return
		}
	}
	w.since = time.Now()
	c.overflow = append(c.overflow, w)
	c.overflowBytes += int64(w.size())
	if len(c.overflow) > c.maxFrames || c.overflowBytes > c.maxBytes {
		// As much again waits as the queue holds: the client does not read.
		c.slow(ac)
		return
	}
	if len(c.overflow) == 1 {
		c.q.hold(true)
		c.q.roomWanted.Store(true)
		c.flush() // the writer may have made room meanwhile
		if len(c.overflow) > 0 {
			c.armOverflow()
		}
	}
}

// flush moves waiting frames into the send queue while there is room.
func (c *delivery) flush() {
	for len(c.overflow) > 0 {
		w := c.overflow[0]
		err := c.q.tryPushFrame(w.queued())
		if errors.Is(err, errQueueFull) {
			c.q.roomWanted.Store(true)
			return
		}
		c.overflow[0] = waiting{}
		c.overflow = c.overflow[1:]
		c.overflowBytes -= int64(w.size())
		if err != nil {
			c.refused(w)
		} else {
			c.queued(w)
		}
	}
	c.overflow = nil
	c.q.hold(false)
	c.q.roomWanted.Store(false)
	c.overflowGen++
}

func (c *delivery) armOverflow() {
	if c.overflowTimer != nil {
		c.overflowTimer.Stop()
	}
	c.overflowGen++
	sys, self, gen := c.sys, c.self, c.overflowGen
	c.overflowTimer = time.AfterFunc(time.Until(c.overflow[0].since.Add(c.wait)), func() {
		wire.Tell(sys, self, &overflowDue{gen: gen})
	})
}

func (c *delivery) queued(w waiting) {
	if w.opens != nil {
		w.opens.setOpen(true)
	}
	if w.notify {
		wire.Tell(c.sys, w.stream, &wire.QueuedNotice{Conn: c.self})
	}
}

func (c *delivery) refused(w waiting) {
	if w.pooled {
		wire.PutFrameBuf(w.frame)
	}
	if w.stream != nil {
		wire.Tell(c.sys, w.stream, &wire.Undelivered{Conn: c.self, Number: w.number})
	}
}

// overflowDue: the timer of the oldest waiting frame (of generation gen)
// fired.
func (c *delivery) overflowDue(ac actor.Context, gen int) {
	if gen == c.overflowGen && len(c.overflow) > 0 {
		if time.Since(c.overflow[0].since) >= c.wait {
			c.slow(ac)
		} else {
			c.armOverflow()
		}
	}
}

// shut closes the send queue: the frames in it are dropped, those
// waiting for room refused.
func (c *delivery) shut() {
	c.q.close()
	for _, w := range c.overflow {
		c.refused(w)
	}
	c.overflow, c.overflowBytes = nil, 0
	c.overflowGen++
}

// stopTimer stops the overflow's timer as the actor stops.
func (c *delivery) stopTimer() {
	if c.overflowTimer != nil {
		c.overflowTimer.Stop()
	}
}

// undeliverable tells a stream that its batch was not queued.
func (c *delivery) undeliverable(m *wire.Deliver) {
	if m.Parts == nil {
		wire.PutFrameBuf(m.Frame)
	}
	wire.Tell(c.sys, m.Stream, &wire.Undelivered{Conn: c.self, Number: m.Number})
}

func (w *waiting) queued() queued {
	q := queued{b: w.frame, pooled: w.pooled, final: w.final, parts: w.parts}
	if w.parts != nil {
		q.n = w.parts.Size()
	}
	return q
}

func (w *waiting) size() int {
	if w.parts != nil {
		return w.parts.Size()
	}
	return len(w.frame)
}
