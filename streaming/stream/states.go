package stream

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// The stream's states, as protoactor behaviors (Become):
//
//	running ──the connection with the round trip goes──▶ holding ──resumeMsg──▶ running
//	running, holding ──DrainStream──▶ draining ──round trip and store done──▶ closed
//	any ──CloseStream, last connection of an ephemeral stream──▶ closed
//
// running forms batches and delivers them. holding does not deliver: the
// replies the departed connection sent before it stopped are in the
// mailbox, ahead of the resumeMsg the stream sent itself, and an ack among
// them still counts. draining (the server stops) delivers nothing more and
// stops the stream once the round trip in flight has ended and its
// acknowledgement is stored. closed (the stream stops) takes nothing more.

// Receive hands the message to the stream's state.
func (st *Actor) Receive(c actor.Context) { st.behavior.Receive(c) }

func (st *Actor) running(c actor.Context) { st.live(c, true) }

func (st *Actor) holding(c actor.Context) {
	if _, ok := c.Message().(*resumeMsg); ok {
		st.behavior.Become(st.running)
		st.step(c)
		return
	}
	st.live(c, false)
}

// live takes a message of the running state (delivering) or the holding
// one.
func (st *Actor) live(c actor.Context, delivering bool) {
	switch msg := c.Message().(type) {
	case *wire.Attach:
		st.attach(c, msg)
	case *wire.DrainStream:
		st.behavior.Become(st.draining)
		st.drained(c)
		return
	case *actor.Terminated, *wire.Detach:
		switch st.removeMsg(c) {
		case removeEnded:
			return
		case removeOrphaned:
			st.behavior.Become(st.holding)
			delivering = false
		}
	default:
		if !st.handle(c) {
			return
		}
	}
	if delivering {
		st.step(c)
		return
	}
	st.form()
	st.settle()
}

func (st *Actor) draining(c actor.Context) {
	switch msg := c.Message().(type) {
	case *wire.Attach:
		st.refuse(c, msg, protocol.CodeShuttingDown, "the server is shutting down")
		return
	case *wire.DrainStream, *resumeMsg:
	case *actor.Terminated, *wire.Detach:
		if st.removeMsg(c) == removeEnded {
			return
		}
	default:
		if !st.handle(c) {
			return
		}
	}
	st.drained(c)
}

// drained stops a draining stream once nothing is left to finish.
func (st *Actor) drained(c actor.Context) {
	if st.inFlight == nil && st.unstored == nil {
		st.close(c)
		return
	}
	st.settle()
}

func (st *Actor) closed(c actor.Context) {
	switch msg := c.Message().(type) {
	case *wire.Attach:
		st.refuse(c, msg, protocol.CodeStreamDeleted, "the durable stream was deleted")
	case *actor.Stopping:
		st.stopping(c)
	}
}

// close stops the stream.
func (st *Actor) close(c actor.Context) {
	st.behavior.Become(st.closed)
	st.publish()
	c.Stop(st.self)
}

// refuse answers an attach the stream does not take.
func (st *Actor) refuse(c actor.Context, m *wire.Attach, code, text string) {
	wire.Tell(st.sys, m.Conn, &wire.AttachRefused{Name: m.Name, Code: code, Msg: text})
	if len(st.atts) == 0 && !st.durable {
		c.Stop(st.self)
	}
}

// removeMsg takes a connection that stopped (Terminated) or left (Detach)
// off the stream.
func (st *Actor) removeMsg(c actor.Context) removal {
	if d, ok := c.Message().(*wire.Detach); ok {
		c.Unwatch(d.Conn)
		return st.remove(c, d.Conn)
	}
	return st.remove(c, c.Message().(*actor.Terminated).Who)
}

// handle takes the messages the running, holding and draining states
// take alike. It reports whether the stream steps on (false: an unknown
// message, or the stream stops).
func (st *Actor) handle(c actor.Context) bool {
	switch msg := c.Message().(type) {
	case *actor.Started:
		st.self, st.sys = c.Self(), c.ActorSystem()
		st.work = &dbWorker{sys: st.sys, self: st.self, wg: st.d.Workers}
		return true
	case *wire.CloseStream:
		st.closeStream(c, msg.Msg)
		return false
	case *actor.Stopping:
		st.stopping(c)
		return false
	}
	return st.roundTripMsg(c.Message()) || st.readMsg(c.Message()) || st.databaseMsg(c.Message())
}

// roundTripMsg takes the connections' answers and the round trip's timers.
func (st *Actor) roundTripMsg(m any) bool {
	switch msg := m.(type) {
	case *wire.ConnClosing:
		for _, a := range st.atts {
			if a.conn.Equal(msg.Conn) {
				a.closing = true
			}
		}
	case *wire.Reply:
		msg.Taken.Add(-1)
		st.handleReply(msg)
	case *wire.Undelivered:
		if rt := st.inFlight; rt != nil && rt.conn.Equal(msg.Conn) && rt.number == msg.Number {
			st.pending.sent--
			st.endRoundTrip("connection closed")
		}
		delete(st.bcast, msg.Conn.Id)
	case *wire.QueuedNotice:
		delete(st.bcast, msg.Conn.Id)
	case *dueMsg:
		if msg.gen == st.timerGen {
			st.due = time.Time{}
		}
	case *ackTimeout:
		if rt := st.inFlight; rt != nil && rt.number == msg.number {
			st.d.Metrics.AckTimeouts.Inc()
			wire.Tell(st.sys, rt.conn, &wire.Control{Frame: wire.ControlFrame(&protocol.Frame{Type: protocol.TypeError, Code: protocol.CodeAckTimeout,
				Stream: rt.name, Message: "the batch was not acknowledged in time; it goes out again"})})
			st.endRoundTrip("ack timeout")
		}
	default:
		return false
	}
	return true
}

// readMsg takes what the history and the catch-up reads bring.
func (st *Actor) readMsg(m any) bool {
	switch msg := m.(type) {
	case *pullMsg:
		st.pullQueued = false
		if msg.gen == st.feedGen && st.feed != nil {
			st.pull()
		}
	case *reopenMsg:
		if st.read == readWaiting {
			st.read = readFree
		}
	case *history.Delivery:
		if st.feed == nil {
			return false
		}
		b, ok, again := st.feed.Take(msg)
		if ok {
			st.received(chunk{records: b.Records, end: b.Cursor})
		}
		if again {
			st.fellBehind()
		}
	case *pageMsg:
		st.caughtUp(msg)
	default:
		return false
	}
	return true
}

// databaseMsg takes the database worker's answers and the timers that
// hand it work.
func (st *Actor) databaseMsg(m any) bool {
	switch msg := m.(type) {
	case *renewLease:
		if msg.gen == st.leaseGen && st.lease == leaseHeld {
			st.renew()
		}
	case *leaseTaken:
		st.leaseGranted(msg)
	case *leaseRenewed:
		st.renewed(msg)
	case *storeAgain:
		if msg.gen == st.storeGen && st.unstored != nil {
			st.storeAck()
		}
	case *ackStored:
		st.stored(msg)
	default:
		return false
	}
	return true
}
