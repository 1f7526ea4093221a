package conn

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// replyQueue is how many acks and nacks of one subscription a connection
// may have handed to its stream and not seen taken.
const replyQueue = 16

// Actor is one WebSocket connection, a child of the server actor. It
// owns the connection's state (its subscriptions, its send queue and the
// frames waiting for room in it) and decides everything in Receive;
// goroutines do the blocking I/O: the reader (the HTTP handler's
// goroutine) forwards each frame the client sends to the mailbox, the
// writer drains the send queue into the socket, and a pinger, while a
// heartbeat's ping is under way, pings the client. The actor stops once the connection
// has ended and its goroutines are done; the streams it was attached to
// watch it, and a round trip bound to it ends then.
//
// Its states are behaviours (Become):
//
//	serving ──subscribe──▶ opening ──Attached, refused──▶ serving
//	serving, opening ──LeaseLost──▶ finishing (a final frame is queued)
//	serving, opening, finishing ──close──▶ closing ──goroutines done──▶ Stop
//
// opening stashes the commands after the subscribe until its stream
// answers; finishing and closing take only acks and nacks.
type Actor struct {
	d         *Deps
	ws        *websocket.Conn
	id        uint64
	log       *zap.Logger
	principal auth.Principal
	delivery  // the send queue and the frames waiting for room in it
	state     actor.Behavior
	// credits bound the frames the reader has handed over and the actor
	// has not taken yet.
	credits chan struct{}
	// gone is closed when the actor stops: the reader stops waiting.
	gone chan struct{}
	// ctx ends when the connection starts to end (close, once).
	ctx    context.Context
	cancel context.CancelFunc
	// pinging: a ping is under way (one at a time).
	pinging bool

	subs map[string]*connSub
	// routes are the subscriptions whose replies the reader hands to
	// their streams itself (routes.go).
	routes routes
	// awaiting is the subscription the opening state waits for; stash
	// holds the commands after it, in the order they came.
	awaiting string
	stash    []*inbound
	bad      int
	// goroutines: the reader, the writer, a pinger and the close
	// handshake not ended yet (the closing connection stops at 0).
	goroutines int
}

// connSub is a subscription of the connection.
type connSub struct {
	stream  *actor.PID // nil while it is set up
	durable bool
	owner   string
	// out is the stream's way into the send queue: open from the
	// subscribed frame to the subscription's end.
	out *Outlet
	// replying counts the acks and nacks handed to the stream and not yet
	// taken (the stream counts them down): at replyQueue more are dropped.
	replying atomic.Int32
}

// New makes the actor of an accepted WebSocket.
func New(d *Deps, ws *websocket.Conn, id uint64, p auth.Principal, remote string) *Actor {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Actor{d: d, ws: ws, id: id, principal: p, ctx: ctx, cancel: cancel,
		credits: make(chan struct{}, replyQueue), gone: make(chan struct{}), subs: map[string]*connSub{},
		log: d.Log.With(zap.Uint64("connection", id), zap.String("remote", remote))}
	c.delivery = newDelivery(&d.Config, c.slowConsumer)
	c.q.budget = d.Budget
	c.state.Become(c.serving)
	return c
}

// Queue is the connection's send queue (the server actor puts it in the
// budget's account: SendQueue.Join).
func (c *Actor) Queue() *SendQueue { return c.q }

// Cancel ends a connection whose actor was never spawned.
func (c *Actor) Cancel() { c.cancel() }

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
	// ended: one of the connection's other goroutines returned (the
	// writer, a pinger, the close handshake).
	ended struct{ writer, pinger bool }
	// room: the writer took a frame while frames waited for room.
	room        struct{}
	overflowDue struct{ gen int }
	pingFailed  struct{}
)

// Cut ends a connection (WebSocket or event stream) with a close frame:
// the writer's watchdog, the queue budget and the server shutting down
// send it.
type Cut struct {
	Code   websocket.StatusCode
	Reason string
	Why    string // the metric counted: slow, budget or none
}

// Receive handles a message in the connection's state.
func (c *Actor) Receive(ac actor.Context) { c.state.Receive(ac) }

// serving is the open connection: it takes every command.
func (c *Actor) serving(ac actor.Context) {
	switch m := ac.Message().(type) {
	case *inbound:
		c.handle(ac, m)
	case *wire.Heartbeat:
		if len(c.subs) > 0 && len(c.overflow) == 0 {
			_ = c.q.tryPush(m.Frame, false)
		}
		if !c.pinging {
			c.pinging = true
			c.goroutines++
			go c.ping()
		}
	case *wire.Deliver:
		if s := c.subs[m.Name]; s == nil || s.stream == nil || !s.stream.Equal(m.Stream) {
			c.undeliverable(m)
			return
		}
		c.enqueue(ac, waiting{frame: m.Frame, parts: m.Parts, pooled: m.Parts == nil, stream: m.Stream, number: m.Number, notify: m.Notify})
	case *wire.DropSub:
		if c.drop(m.Name, m.Stream) {
			_ = c.q.tryPush(wire.ControlFrame(&protocol.Frame{Type: protocol.TypeError, Code: m.Code, Message: m.Msg, Stream: m.Name}), false)
		}
	case *wire.Control:
		_ = c.q.tryPush(m.Frame, false)
	case *wire.LeaseLost:
		if s := c.subs[m.Name]; s != nil && s.stream != nil && s.stream.Equal(m.Stream) {
			c.leaseLost(ac, m.Name)
		}
	case *wire.Attached, *wire.SubscribeRefused, *wire.AttachRefused:
		c.unawaited(m)
	default:
		c.live(ac)
	}
}

// opening waits for the stream of the subscription being set up; the
// commands after it are stashed and taken, in order, once it answers.
func (c *Actor) opening(ac actor.Context) {
	switch m := ac.Message().(type) {
	case *inbound:
		c.stash = append(c.stash, m)
	case *wire.Attached:
		if m.Name != c.awaiting {
			c.unawaited(m)
			return
		}
		sub := c.subs[m.Name]
		sub.stream, sub.durable, sub.owner = m.Stream, m.Durable, m.Owner
		if !sub.durable || c.principal.Owns(sub.owner) {
			c.routes.set(m.Name, route{stream: sub.stream, replying: &sub.replying})
		}
		c.d.Metrics.Subscribers.Inc()
		c.awaiting = ""
		c.state.Become(c.serving)
		c.enqueue(ac, waiting{frame: m.Frame, opens: sub.out})
		c.unstash(ac)
	case *wire.SubscribeRefused:
		if m.Name == c.awaiting {
			c.refusedSub(ac, m.Name, m.Code, m.Msg, m.Abusive)
		}
	case *wire.AttachRefused:
		if m.Name == c.awaiting {
			c.refusedSub(ac, m.Name, m.Code, m.Msg, false)
		}
	default:
		c.serving(ac)
	}
}

// finishing: a final frame is queued (lease_lost); nothing more is, and
// the connection closes once the writer has written it.
func (c *Actor) finishing(ac actor.Context) {
	switch ac.Message().(type) {
	case *wire.Heartbeat, *wire.Control, *wire.LeaseLost:
	default:
		if !c.ending(ac) {
			c.live(ac)
		}
	}
}

// closing: the connection is ending. Nothing more is queued; it takes
// acks and nacks until the socket's reads end, and stops once its
// goroutines are done.
func (c *Actor) closing(ac actor.Context) {
	switch ac.Message().(type) {
	case *readEnded, *ended:
		c.goroutines--
	case *actor.Stopping:
		c.stopping()
		return
	default:
		if !c.ending(ac) {
			return
		}
	}
	if c.goroutines == 0 {
		ac.Stop(c.self)
	}
}

// stopped: after Stopping, nothing is left to do.
func (c *Actor) stopped(actor.Context) {}

// live handles what the states before closing handle alike: the
// goroutines' reports, the cuts, the overflow's room and timer.
func (c *Actor) live(ac actor.Context) {
	switch m := ac.Message().(type) {
	case *actor.Started:
		c.self, c.sys = ac.Self(), ac.ActorSystem()
		c.goroutines += 2 // the reader, the writer
		go c.writeLoop()
		c.d.Metrics.Connections.Inc()
		c.log.Debug("connected")
	case *readEnded:
		c.goroutines--
		if websocket.CloseStatus(m.err) == -1 {
			c.log.Debug("connection lost", zap.Error(m.err))
		}
		c.close(ac, websocket.StatusNormalClosure, "")
	case *ended:
		c.goroutines--
		c.pinging = c.pinging && !m.pinger
		if m.writer {
			c.close(ac, websocket.StatusInternalError, "")
		}
	case *pingFailed:
		c.close(ac, websocket.StatusPolicyViolation, protocol.ClosePingTimeout)
	case *Cut:
		c.cutOff(ac, m)
	case *room:
		c.flush()
	case *overflowDue:
		c.overflowDue(ac, m.gen)
	case *actor.Stopping:
		// Stopped from outside (the server failed): the client still gets
		// the close frame.
		c.close(ac, websocket.StatusGoingAway, protocol.CloseShuttingDown)
		c.stopping()
	}
}

// ending handles what finishing and closing handle alike: the replies the
// client still sends, and the streams that answer too late; false for
// other messages.
func (c *Actor) ending(ac actor.Context) bool {
	switch m := ac.Message().(type) {
	case *inbound:
		<-c.credits // the reader may read the next frame
		if m.err == nil && m.cmd != nil && isReply(m.cmd) {
			if code, _ := c.reply(m.cmd); code != "" {
				c.d.Metrics.BadFrames.WithLabelValues(code).Inc()
			}
		}
	case *wire.Attached, *wire.SubscribeRefused, *wire.AttachRefused:
		c.unawaited(m)
	case *wire.Deliver:
		c.undeliverable(m)
	case *wire.DropSub:
		c.drop(m.Name, m.Stream)
	default:
		return false
	}
	return true
}

// stopping ends the actor's account: the streams watch it, and its
// Terminated detaches it from them, after the replies it handed them.
func (c *Actor) stopping() {
	for _, s := range c.subs {
		if s.stream != nil {
			c.d.Metrics.Subscribers.Dec()
		}
	}
	c.subs = nil
	c.routes.clear()
	c.stopTimer()
	c.d.Metrics.Connections.Dec()
	close(c.gone)
	c.state.Become(c.stopped)
}

// stashed is a stashed message handed to the current state again.
type stashed struct {
	actor.Context
	m any
}

func (s stashed) Message() any { return s.m }

// unstash hands the stashed commands to the current state, in order: one
// that starts another subscription's opening stashes those after it again.
func (c *Actor) unstash(ac actor.Context) {
	pending := c.stash
	c.stash = nil
	for i, m := range pending {
		pending[i] = nil
		c.state.Receive(stashed{ac, m})
	}
}

// unawaited detaches a stream that answers a subscription the connection
// no longer waits for (it is ending), and forgets that subscription.
func (c *Actor) unawaited(m any) {
	var name string
	switch m := m.(type) {
	case *wire.Attached:
		wire.Tell(c.sys, m.Stream, &wire.Detach{Conn: c.self})
		name = m.Name
	case *wire.SubscribeRefused:
		name = m.Name
	case *wire.AttachRefused:
		name = m.Name
	}
	if s := c.subs[name]; s != nil && s.stream == nil {
		delete(c.subs, name)
	}
}

// refusedSub ends the opening of a subscription its stream refused.
func (c *Actor) refusedSub(ac actor.Context, name, code, msg string, abusive bool) {
	delete(c.subs, name)
	c.awaiting = ""
	c.state.Become(c.serving)
	c.reject(ac, code, msg, name, abusive)
	c.unstash(ac)
}

// drop forgets a subscription its stream ended; false when the stream is
// not the subscription's.
func (c *Actor) drop(name string, stream *actor.PID) bool {
	s := c.subs[name]
	if s == nil || s.stream == nil || !s.stream.Equal(stream) {
		return false
	}
	s.out.setOpen(false)
	c.routes.remove(name)
	delete(c.subs, name)
	c.d.Metrics.Subscribers.Dec()
	return true
}

// leaseLost ends the connection after an error frame naming the durable
// stream whose lease another process took: nothing more is queued, the
// streams send it nothing more, and once the writer has written the frame
// the connection closes (1013, "lease lost"). Its client connects again
// and gets the records it would otherwise have seen twice, redelivered.
func (c *Actor) leaseLost(ac actor.Context, name string) {
	c.log.Warn("closing a connection whose durable stream another process took", zap.String("stream", name))
	c.state.Become(c.finishing)
	for _, s := range c.subs {
		s.out.setOpen(false) // the final frame is the last
		if s.stream != nil {
			wire.Tell(c.sys, s.stream, &wire.ConnClosing{Conn: c.self})
		}
	}
	c.enqueue(ac, waiting{final: true, frame: wire.ControlFrame(&protocol.Frame{Type: protocol.TypeError, Code: protocol.CodeLeaseLost, Stream: name,
		Message: "another server took the durable stream and goes on from its stored cursor: connect again; " +
			"the records after it come again, marked redelivered"})})
	c.unstash(ac)
}

// cutOff ends the connection on a cut (the writer's watchdog, the queue
// budget, the server shutting down).
func (c *Actor) cutOff(ac actor.Context, m *Cut) {
	switch m.Why {
	case "slow":
		c.d.Metrics.SlowDropped.Inc()
		c.log.Warn("disconnecting a client that does not read", zap.String("reason", protocol.CloseSlowConsumer))
	case "budget":
		c.d.Metrics.BudgetCuts.Inc()
		c.log.Warn("disconnecting a client that does not read (or the one with the most queued frames): the streaming queue budget is reached",
			zap.String("reason", protocol.CloseMemoryBudget), zap.Int64("budget", c.d.Config.QueueBudget),
			zap.Int64("bytesTaken", c.q.written.Load()), zap.Duration("writeIdle", c.q.idle()))
		// The budget took back the frame in the writer: a write the
		// client does not take is ended soon (which closes the socket),
		// so that the frame is freed; a client that reads gets its
		// frames and the close frame meanwhile.
		time.AfterFunc(budgetCloseGrace, c.endStuckWrite)
	}
	c.close(ac, m.Code, m.Reason)
}

// slowConsumer cuts off a client that does not read: a frame waited for
// room in its queue for WriteTimeout.
func (c *Actor) slowConsumer(ac actor.Context) {
	c.d.Metrics.SlowDropped.Inc()
	c.log.Warn("disconnecting a client that does not read", zap.String("reason", protocol.CloseSlowConsumer))
	c.close(ac, websocket.StatusPolicyViolation, protocol.CloseSlowConsumer)
}

// close starts ending the connection with a status and reason (once: it
// ends ctx) and becomes closing: nothing more is queued, the streams are
// told (none sends to it again), and the close handshake runs in the
// background (it may take seconds with a peer that does not read). The
// reader goes on taking acks and nacks until the socket ends; then the
// actor stops, and the round trips bound to it end.
func (c *Actor) close(ac actor.Context, code websocket.StatusCode, reason string) {
	if c.ctx.Err() != nil {
		return
	}
	c.state.Become(c.closing)
	if reason != "" {
		c.d.Metrics.Disconnects.WithLabelValues(reason).Inc()
	}
	c.cancel()
	c.shut()
	for _, s := range c.subs {
		if s.stream != nil {
			wire.Tell(c.sys, s.stream, &wire.ConnClosing{Conn: c.self})
		}
	}
	c.goroutines++
	ws, sys, self := c.ws, c.sys, c.self
	go func() {
		_ = ws.Close(code, reason)
		wire.Tell(sys, self, &ended{})
	}()
	c.unstash(ac)
}
