package streaming

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// connActor is one WebSocket connection, a child of the server actor. It
// owns the connection's state (its subscriptions, its send queue and the
// frames waiting for room in it) and decides everything in Receive; two
// goroutines do the blocking I/O: the reader (the HTTP handler's
// goroutine) forwards each frame the client sends to the mailbox, the
// writer drains the send queue into the socket. The actor stops once the
// connection has ended and its goroutines are done; the streams it was
// attached to watch it, and a round trip bound to it ends then.
type connActor struct {
	srv       *Server
	ws        *websocket.Conn
	id        uint64
	log       *zap.Logger
	principal auth.Principal
	q         *sendQueue
	// credits bound the frames the reader has handed over and the actor
	// has not taken yet.
	credits chan struct{}
	// gone is closed when the actor stops: the reader stops waiting.
	gone   chan struct{}
	ctx    context.Context // ends when the connection starts to end
	cancel context.CancelFunc
	// writeCtx is the writer's: ending it (endWrite) ends a write in
	// progress and closes the socket (a budget cut of a client that does
	// not read); the writer ends it when it returns.
	writeCtx context.Context
	endWrite context.CancelFunc

	self *actor.PID
	sys  *actor.ActorSystem

	subs map[string]*connSub
	// opening is the subscription being set up: the commands after it
	// wait (stashed) until it is, as they were sent.
	opening string
	stash   []*inbound
	bad     int
	// closing is set when the connection starts to end: nothing more is
	// queued for it, and it takes only acks and nacks until the socket's
	// reads end.
	closing bool
	// finishing: a final frame is queued (lease_lost); nothing more is,
	// and the connection closes once the writer has written it.
	finishing  bool
	readerDone bool
	running    int // the writer, the close handshake and pings not ended yet
	pinging    bool

	// overflow are frames waiting for room in the send queue, oldest
	// first; the oldest waits at most WriteTimeout, then the client is
	// cut off as a slow consumer.
	overflow      []waiting
	overflowBytes int64
	overflowTimer *time.Timer
	overflowGen   int
}

// connSub is a subscription of the connection.
type connSub struct {
	stream  *actor.PID // nil while it is set up
	durable bool
	owner   string
	// replying counts the acks and nacks handed to the stream and not yet
	// taken (the stream counts them down): at replyQueue more are dropped.
	replying atomic.Int32
}

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
}

// Messages of a connection actor.
type (
	// inbound is a frame the reader read, decoded (a command, or why it
	// is not one).
	inbound struct {
		typ websocket.MessageType
		cmd *protocol.Command
		err error
	}
	// readEnded: the socket's reads ended (the client went, or the close
	// handshake is done).
	readEnded struct{ err error }
	// ended: one of the connection's goroutines returned.
	ended struct{ writer bool }
	// room: the writer took a frame while frames waited for room.
	room struct{}
	// cut ends the connection with a close frame (the writer's watchdog,
	// the queue budget, the server shutting down).
	cut struct {
		code   websocket.StatusCode
		reason string
		why    string // the metric counted: slow, budget or none
	}
	overflowDue struct{ gen int }
	pingFailed  struct{}
)

// Receive handles the connection's messages.
func (c *connActor) Receive(ac actor.Context) {
	switch m := ac.Message().(type) {
	case *actor.Started:
		c.self, c.sys = ac.Self(), ac.ActorSystem()
		c.running++
		go c.writeLoop()
		c.srv.m.connections.Inc()
		c.log.Debug("connected")
	case *inbound:
		if c.opening != "" {
			c.stash = append(c.stash, m)
			return
		}
		c.handle(ac, m)
	case *readEnded:
		c.readerDone = true
		if st := websocket.CloseStatus(m.err); st == -1 && !c.closing {
			c.log.Debug("connection lost", zap.Error(m.err))
		}
		c.close(websocket.StatusNormalClosure, "")
	case *ended:
		c.running--
		if m.writer && !c.closing {
			c.close(websocket.StatusInternalError, "")
		}
	case *pingEnded:
		c.running--
		c.pinging = false
	case *pingFailed:
		c.close(websocket.StatusPolicyViolation, protocol.ClosePingTimeout)
	case *cut:
		if c.closing {
			return
		}
		switch m.why {
		case "slow":
			c.srv.m.slowDropped.Inc()
			c.log.Warn("disconnecting a client that does not read", zap.String("reason", protocol.CloseSlowConsumer))
		case "budget":
			c.srv.m.budgetCuts.Inc()
			c.log.Warn("disconnecting a client that does not read (or the one with the most queued frames): the streaming queue budget is reached",
				zap.String("reason", protocol.CloseMemoryBudget), zap.Int64("budget", c.srv.cfg.QueueBudget),
				zap.Int64("bytesTaken", c.q.written.Load()), zap.Duration("writeIdle", c.q.idle()))
			// The budget took back the frame in the writer: a write the
			// client does not take is ended soon (which closes the socket),
			// so that the frame is freed; a client that reads gets its
			// frames and the close frame meanwhile.
			time.AfterFunc(budgetCloseGrace, c.endWrite)
		}
		c.close(m.code, m.reason)
	case *room:
		c.flush()
	case *overflowDue:
		if m.gen == c.overflowGen && len(c.overflow) > 0 {
			if time.Since(c.overflow[0].since) >= c.srv.cfg.WriteTimeout {
				c.slowConsumer()
			} else {
				c.armOverflow()
			}
		}
	case *wire.Heartbeat:
		if c.closing || c.finishing {
			return
		}
		if len(c.subs) > 0 && len(c.overflow) == 0 {
			_ = c.q.tryPush(m.Frame, false)
		}
		c.ping()
	case *wire.SubscribeRefused:
		if c.opening == m.Name {
			delete(c.subs, m.Name)
			c.opened(ac)
			if !c.closing {
				c.reject(m.Code, m.Msg, m.Name, m.Abusive)
			}
		}
	case *wire.AttachRefused:
		if c.opening == m.Name {
			delete(c.subs, m.Name)
			c.opened(ac)
			if !c.closing {
				c.reject(m.Code, m.Msg, m.Name, false)
			}
		}
	case *wire.Attached:
		sub := c.subs[m.Name]
		if c.opening != m.Name || sub == nil || c.closing {
			wire.Tell(c.sys, m.Stream, &wire.Detach{Conn: c.self})
			if c.opening == m.Name {
				delete(c.subs, m.Name)
				c.opened(ac)
			}
			break
		}
		sub.stream, sub.durable, sub.owner = m.Stream, m.Durable, m.Owner
		c.srv.m.subscribers.Inc()
		c.sendFrame(m.Frame)
		c.opened(ac)
	case *wire.Deliver:
		c.deliver(ac, m)
	case *wire.DropSub:
		if s := c.subs[m.Name]; s != nil && s.stream != nil && s.stream.Equal(m.Stream) {
			delete(c.subs, m.Name)
			c.srv.m.subscribers.Dec()
			if !c.closing && !c.finishing {
				_ = c.q.tryPush(wire.ControlFrame(&protocol.Frame{Type: protocol.TypeError, Code: m.Code, Message: m.Msg, Stream: m.Name}), false)
			}
		}
	case *wire.Control:
		if !c.closing && !c.finishing {
			_ = c.q.tryPush(m.Frame, false)
		}
	case *wire.LeaseLost:
		if s := c.subs[m.Name]; s != nil && s.stream != nil && s.stream.Equal(m.Stream) {
			c.leaseLost(m.Name)
		}
	case *actor.Stopping:
		if !c.closing {
			// Stopped from outside (the server failed): the client still
			// gets the close frame.
			c.close(websocket.StatusGoingAway, protocol.CloseShuttingDown)
		}
		// The streams watch the actor: its Terminated detaches it from
		// them, after the replies it handed them.
		for _, s := range c.subs {
			if s.stream != nil {
				c.srv.m.subscribers.Dec()
			}
		}
		c.subs = nil
		if c.overflowTimer != nil {
			c.overflowTimer.Stop()
		}
		c.srv.m.connections.Dec()
		close(c.gone)
		return
	default:
		return
	}
	if c.closing && c.readerDone && c.running == 0 {
		ac.Stop(c.self)
	}
}

// opened ends the setting up of a subscription: the commands that waited
// for it are taken now, in order.
func (c *connActor) opened(ac actor.Context) {
	c.opening = ""
	for len(c.stash) > 0 && c.opening == "" {
		m := c.stash[0]
		c.stash[0] = nil
		c.stash = c.stash[1:]
		c.handle(ac, m)
	}
}

// handle decodes and executes a frame from the client.
func (c *connActor) handle(ac actor.Context, m *inbound) {
	<-c.credits // the reader may read the next frame
	if m.typ != websocket.MessageText {
		if !c.closing {
			c.reject(protocol.CodeBadFrame, "only text frames holding JSON commands are accepted", "", true)
		}
		return
	}
	cmd, err := m.cmd, m.err
	if err != nil {
		code, msg, stream := protocol.CodeBadJSON, err.Error(), ""
		var bc *protocol.ErrBadCommand
		if errors.As(err, &bc) {
			code, msg, stream = bc.Code, bc.Err.Error(), bc.Stream
		}
		if !c.closing {
			c.reject(code, msg, stream, true)
		}
		return
	}
	if (c.closing || c.finishing) && cmd.Type != protocol.TypeAck && cmd.Type != protocol.TypeNack {
		return // an ending connection takes only replies to what it was sent
	}
	c.execute(ac, cmd)
}

func (c *connActor) execute(ac actor.Context, cmd *protocol.Command) {
	switch cmd.Type {
	case protocol.TypeSubscribe:
		c.subscribe(ac, cmd)
	case protocol.TypeAck, protocol.TypeNack:
		s := c.subs[cmd.Stream]
		if s == nil || s.stream == nil {
			c.reject(protocol.CodeUnknownStream, fmt.Sprintf("no subscription named %q on this connection", cmd.Stream), cmd.Stream, false)
			return
		}
		if s.durable && !c.principal.Owns(s.owner) {
			c.reject(protocol.CodeForbidden, fmt.Sprintf("durable stream %q belongs to another credential", cmd.Stream), cmd.Stream, false)
			return
		}
		if s.replying.Load() >= replyQueue {
			c.srv.m.staleAcks.Inc()
			return
		}
		s.replying.Add(1)
		wire.Tell(c.sys, s.stream, &wire.Reply{Conn: c.self, Batch: cmd.Batch, Ack: cmd.Type == protocol.TypeAck, UpTo: cmd.UpToSeq, Reason: cmd.Reason,
			Taken: &s.replying})
	case protocol.TypeUnsubscribe:
		s := c.subs[cmd.Stream]
		if s == nil || s.stream == nil {
			c.reject(protocol.CodeUnknownStream, fmt.Sprintf("no subscription named %q on this connection", cmd.Stream), cmd.Stream, true)
			return
		}
		delete(c.subs, cmd.Stream)
		c.srv.m.subscribers.Dec()
		wire.Tell(c.sys, s.stream, &wire.Detach{Conn: c.self})
		c.send(&protocol.Frame{Type: protocol.TypeUnsubscribed, Stream: cmd.Stream})
	case protocol.TypePing:
		t := c.srv.tip()
		c.send(&protocol.Frame{Type: protocol.TypePong, Tip: &t})
	}
}

// subscribe checks a subscribe command and asks the server for its
// stream; the commands after it wait for the answer.
func (c *connActor) subscribe(ac actor.Context, cmd *protocol.Command) {
	cfg := &c.srv.cfg
	_, exists := c.subs[cmd.Stream]
	switch {
	case exists:
		c.reject(protocol.CodeStreamExists, fmt.Sprintf("a subscription named %q is already on this connection", cmd.Stream), cmd.Stream, true)
		return
	case len(c.subs) >= cfg.MaxSubscriptions:
		c.reject(protocol.CodeTooManySubscriptions, fmt.Sprintf("at most %d subscriptions per connection", cfg.MaxSubscriptions), cmd.Stream, true)
		return
	case cmd.BatchSize > cfg.MaxBatchSize:
		c.reject(protocol.CodeBadRequest, fmt.Sprintf("batchSize %d is above the limit %d", cmd.BatchSize, cfg.MaxBatchSize), cmd.Stream, true)
		return
	case time.Duration(cmd.BatchTimeout) > cfg.MaxBatchTimeout:
		c.reject(protocol.CodeBadRequest, fmt.Sprintf("batchTimeout is above the limit %s", cfg.MaxBatchTimeout), cmd.Stream, true)
		return
	}
	var filter record.Filter
	if cmd.Filter != nil {
		var err error
		if filter, err = cmd.Filter.History(); err != nil {
			c.reject(protocol.CodeBadFilter, err.Error(), cmd.Stream, true)
			return
		}
	}
	if !cmd.Durable && !c.principal.Allows(auth.ScopeSubscribe) {
		c.reject(protocol.CodeForbidden, "this token has no subscribe scope: it may use durable streams only", cmd.Stream, true)
		return
	}
	c.subs[cmd.Stream] = &connSub{}
	c.opening = cmd.Stream
	wire.Tell(c.sys, ac.Parent(), &wire.OpenStream{Cmd: cmd, Filter: filter, Who: c.principal, Conn: c.self, ID: c.id, Queue: c.q})
}

// reject answers a command with an error frame; abusive errors count
// toward MaxBadFrames, after which the connection is closed.
func (c *connActor) reject(code, msg, stream string, abusive bool) {
	c.srv.m.badFrames.WithLabelValues(code).Inc()
	c.send(&protocol.Frame{Type: protocol.TypeError, Code: code, Message: msg, Stream: stream})
	if !abusive {
		return
	}
	c.bad++
	if c.bad >= c.srv.cfg.MaxBadFrames {
		c.log.Info("closing a connection that sends bad frames", zap.Int("badFrames", c.bad))
		c.close(websocket.StatusPolicyViolation, protocol.CloseTooManyErrors)
	}
}

// send queues a control frame; when the queue has no room it waits for
// some (the client is cut off if it does not read within WriteTimeout).
func (c *connActor) send(f *protocol.Frame) { c.sendFrame(wire.ControlFrame(f)) }

func (c *connActor) sendFrame(b []byte) {
	if c.closing || c.finishing {
		return
	}
	c.enqueue(waiting{frame: b})
}

// deliver queues a stream's batch frame, or tells the stream it cannot.
func (c *connActor) deliver(ac actor.Context, m *wire.Deliver) {
	s := c.subs[m.Name]
	if c.closing || c.finishing || s == nil || s.stream == nil || !s.stream.Equal(m.Stream) {
		if m.Parts == nil {
			wire.PutFrameBuf(m.Frame)
		}
		wire.Tell(c.sys, m.Stream, &wire.Undelivered{Conn: c.self, Number: m.Number})
		return
	}
	c.enqueue(waiting{frame: m.Frame, parts: m.Parts, pooled: m.Parts == nil, stream: m.Stream, number: m.Number, notify: m.Notify})
}

// enqueue puts a frame in the send queue, or behind the frames waiting
// for room in it.
func (c *connActor) enqueue(w waiting) {
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
	if len(c.overflow) > c.srv.cfg.SendQueueFrames || c.overflowBytes > c.srv.cfg.SendQueueBytes {
		// As much again waits as the queue holds: the client does not read.
		c.slowConsumer()
		return
	}
	if len(c.overflow) == 1 {
		c.q.roomWanted.Store(true)
		c.flush() // the writer may have made room meanwhile
		if len(c.overflow) > 0 {
			c.armOverflow()
		}
	}
}

// flush moves waiting frames into the send queue while there is room.
func (c *connActor) flush() {
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
	c.q.roomWanted.Store(false)
	c.overflowGen++
}

func (c *connActor) armOverflow() {
	if c.overflowTimer != nil {
		c.overflowTimer.Stop()
	}
	c.overflowGen++
	sys, self, gen := c.sys, c.self, c.overflowGen
	c.overflowTimer = time.AfterFunc(time.Until(c.overflow[0].since.Add(c.srv.cfg.WriteTimeout)), func() {
		wire.Tell(sys, self, &overflowDue{gen: gen})
	})
}

func (c *connActor) queued(w waiting) {
	if w.notify {
		wire.Tell(c.sys, w.stream, &wire.QueuedNotice{Conn: c.self})
	}
}

func (c *connActor) refused(w waiting) {
	if w.pooled {
		wire.PutFrameBuf(w.frame)
	}
	if w.stream != nil {
		wire.Tell(c.sys, w.stream, &wire.Undelivered{Conn: c.self, Number: w.number})
	}
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

// leaseLost ends the connection after an error frame naming the durable
// stream whose lease another process took: nothing more is queued, the
// streams send it nothing more, and once the writer has written the frame
// the connection closes (1013, "lease lost"). Its client connects again
// and gets the records it would otherwise have seen twice, redelivered.
func (c *connActor) leaseLost(name string) {
	if c.closing || c.finishing {
		return
	}
	c.log.Warn("closing a connection whose durable stream another process took", zap.String("stream", name))
	c.enqueue(waiting{final: true, frame: wire.ControlFrame(&protocol.Frame{Type: protocol.TypeError, Code: protocol.CodeLeaseLost, Stream: name,
		Message: "another server took the durable stream and goes on from its stored cursor: connect again; " +
			"the records after it come again, marked redelivered"})})
	c.finishing = true
	for _, s := range c.subs {
		if s.stream != nil {
			wire.Tell(c.sys, s.stream, &wire.ConnClosing{Conn: c.self})
		}
	}
}

// slowConsumer cuts off a client that does not read: a frame waited for
// room in its queue for WriteTimeout.
func (c *connActor) slowConsumer() {
	if c.closing {
		return
	}
	c.srv.m.slowDropped.Inc()
	c.log.Warn("disconnecting a client that does not read", zap.String("reason", protocol.CloseSlowConsumer))
	c.close(websocket.StatusPolicyViolation, protocol.CloseSlowConsumer)
}

// close starts ending the connection with a status and reason (once):
// nothing more is queued, the streams are told (none sends to it again),
// and the close handshake runs in the background (it may take seconds
// with a peer that does not read). The reader goes on taking acks and
// nacks until the socket ends; then the actor stops, and the round trips
// bound to it end.
func (c *connActor) close(code websocket.StatusCode, reason string) {
	if c.closing {
		return
	}
	c.closing = true
	if reason != "" {
		c.srv.m.disconnects.WithLabelValues(reason).Inc()
	}
	c.cancel()
	c.q.close()
	for _, w := range c.overflow {
		c.refused(w)
	}
	c.overflow, c.overflowBytes = nil, 0
	c.overflowGen++
	for _, s := range c.subs {
		if s.stream != nil {
			wire.Tell(c.sys, s.stream, &wire.ConnClosing{Conn: c.self})
		}
	}
	c.running++
	ws, sys, self := c.ws, c.sys, c.self
	go func() {
		_ = ws.Close(code, reason)
		wire.Tell(sys, self, &ended{})
	}()
}

// ping checks that the client answers (one ping at a time); one that does
// not within PingTimeout is disconnected.
func (c *connActor) ping() {
	if c.pinging {
		return
	}
	c.pinging = true
	c.running++
	ctx, ws, sys, self, timeout := c.ctx, c.ws, c.sys, c.self, c.srv.cfg.PingTimeout
	go func() {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := ws.Ping(pctx)
		if err != nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
			wire.Tell(sys, self, &pingFailed{})
		}
		cancel()
		wire.Tell(sys, self, &pingEnded{})
	}()
}

// pingEnded: a ping returned.
type pingEnded struct{}

// writeLoop writes queued frames. A write that takes longer than
// WriteTimeout (the client does not read) trips the watchdog, which cuts
// the client off; a timer reset per write costs less than a context with
// a deadline. The writes take writeCtx, which only endWrite ends (a budget
// cut whose write is stuck).
func (c *connActor) writeLoop() {
	sys, self := c.sys, c.self
	defer wire.Tell(sys, self, &ended{writer: true})
	defer c.endWrite()
	watchdog := time.AfterFunc(time.Hour, func() {
		// The close handshake waits (up to its 5 s) for the stuck write,
		// so a client that reads again in that time gets its frames, then
		// the close frame with the reason.
		wire.Tell(sys, self, &cut{code: websocket.StatusPolicyViolation, reason: protocol.CloseSlowConsumer, why: "slow"})
	})
	watchdog.Stop()
	defer watchdog.Stop()
	for {
		f, ok := c.q.pop(c.ctx.Done())
		if !ok {
			return
		}
		if c.q.roomWanted.CompareAndSwap(true, false) {
			wire.Tell(sys, self, &room{})
		}
		watchdog.Reset(c.srv.cfg.WriteTimeout)
		var err error
		if f.parts != nil {
			err = writeParts(c.writeCtx, c.ws, f.parts, c.q.progressed)
		} else {
			err = c.ws.Write(c.writeCtx, websocket.MessageText, f.b)
		}
		c.q.done(f)
		if !watchdog.Stop() {
			return // tripped: the connection is being cut off
		}
		if f.pooled {
			wire.PutFrameBuf(f.b)
		}
		if err != nil {
			return
		}
		if f.final {
			wire.Tell(sys, self, &cut{code: websocket.StatusTryAgainLater, reason: protocol.CloseLeaseLost})
		}
	}
}

// readLoop is the reader: it hands every frame to the actor, at most
// cap(credits) ahead of it, until the socket's reads end. Reads take no
// context: one with a Done channel costs a registration per read, and
// cancelling it would drop the socket without a close handshake. Closing
// the connection ends a read.
func (c *connActor) readLoop(sys *actor.ActorSystem, pid *actor.PID) {
	var buf bytes.Buffer
	for {
		typ, data, err := c.read(&buf)
		if err != nil {
			wire.Tell(sys, pid, &readEnded{err: err})
			return
		}
		select {
		case c.credits <- struct{}{}:
		case <-c.gone:
			return
		}
		// Decoding here decides nothing: the actor takes the command.
		m := &inbound{typ: typ}
		if typ == websocket.MessageText {
			m.cmd, m.err = protocol.DecodeCommand(data)
		}
		wire.Tell(sys, pid, m)
	}
}

// read reads one message into buf (reused: most commands are small).
func (c *connActor) read(buf *bytes.Buffer) (websocket.MessageType, []byte, error) {
	typ, r, err := c.ws.Reader(context.Background())
	if err != nil {
		return 0, nil, err
	}
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return 0, nil, err
	}
	if buf.Cap() > 1<<20 {
		defer func() { *buf = bytes.Buffer{} }() // do not keep a large buffer
	}
	return typ, buf.Bytes(), nil
}
