package conn

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// Events is one server-sent events stream (GET /events), a child of
// the server actor: a connection whose client sends nothing. It subscribes
// one broadcast stream through the server actor, as a WebSocket
// subscription does, and queues the stream's batches, the heartbeats and
// the opening comment in its send queue (delivery, shared with the
// WebSocket connection actor); the HTTP handler's goroutine is its writer
// (writeEvents), which writes them as events. Its states:
//
//	opening ──Attached──▶ serving ──close──▶ closing ──the writer returned──▶ Stop
//
// A refused subscription, a client gone, a write timeout, a frame waiting
// WriteTimeout for room and the server stopping all close it.
type Events struct {
	delivery
	d     *Deps
	log   *zap.Logger
	state actor.Behavior
	open  *wire.OpenStream // the subscription, sent when the actor starts
	start record.Cursor
	// stream is the broadcast stream, once attached; out its way into the
	// send queue, open once the opening comment is queued.
	stream *actor.PID
	out    *Outlet
	// ctx is the request's; close ends it, and the writer returns.
	ctx    context.Context
	cancel context.CancelFunc
}

// Messages of an events actor.
type (
	// eventsEnded: the writer returned; slow when a write timed out.
	eventsEnded struct{ slow bool }
)

func NewEvents(d *Deps, ctx context.Context, id uint64, f protocol.Filter, filter record.Filter, start record.Cursor,
	who auth.Principal) *Events {
	e := &Events{d: d, start: start, log: d.Log.Named("events"),
		open: &wire.OpenStream{Cmd: &protocol.Command{Type: protocol.TypeSubscribe, Stream: "events", Mode: protocol.ModeBroadcast,
			From: start.String(), Filter: &f}, Filter: filter, Who: who, ID: id}}
	e.ctx, e.cancel = context.WithCancel(ctx)
	e.delivery = newDelivery(&d.Config, e.slowConsumer)
	e.out = e.q.newOutlet()
	e.open.Queue = e.out
	e.state.Become(e.opening)
	return e
}

// Queue is the event stream's send queue.
func (e *Events) Queue() *SendQueue { return e.q }

// Cancel ends an event stream whose actor was never spawned.
func (e *Events) Cancel() { e.cancel() }

// Receive handles a message in the event stream's state.
func (e *Events) Receive(ac actor.Context) { e.state.Receive(ac) }

// opening waits for the stream.
func (e *Events) opening(ac actor.Context) {
	switch m := ac.Message().(type) {
	case *actor.Started:
		e.self, e.sys = ac.Self(), ac.ActorSystem()
		e.d.Metrics.SSEClients.Inc()
		e.open.Conn = e.self
		wire.Tell(e.sys, ac.Parent(), e.open)
	case *wire.Attached:
		e.stream = m.Stream
		e.state.Become(e.serving)
		e.enqueue(ac, waiting{frame: []byte(": subscribed from " + e.start.String() + "\n\n"), opens: e.out})
	case *wire.SubscribeRefused:
		e.log.Debug("event stream refused", zap.String("code", m.Code), zap.String("message", m.Msg))
		e.close()
	case *wire.AttachRefused:
		e.log.Debug("event stream refused", zap.String("code", m.Code), zap.String("message", m.Msg))
		e.close()
	case *wire.Heartbeat: // the opening comment comes first
	default:
		e.serving(ac)
	}
}

// serving queues the stream's batches and the heartbeats.
func (e *Events) serving(ac actor.Context) {
	switch m := ac.Message().(type) {
	case *wire.Deliver:
		if m.Parts == nil || m.Parts.Records == nil || !m.Stream.Equal(e.stream) {
			e.undeliverable(m) // an event needs its record's cursor
			return
		}
		e.enqueue(ac, waiting{parts: m.Parts, stream: m.Stream, number: m.Number, notify: m.Notify})
	case *wire.Heartbeat:
		if len(e.overflow) == 0 {
			_ = e.q.tryPush(heartbeatEvent(e.d.Tips.JSON()), false)
		}
	case *eventsEnded:
		if m.slow {
			e.countSlow()
		}
		e.close()
		ac.Stop(e.self)
	case *wire.DropSub, *Cut:
		e.close()
	case *room:
		e.flush()
	case *overflowDue:
		e.overflowDue(ac, m.gen)
	case *actor.Stopping:
		e.close()
		e.stopping()
	}
}

// closing waits for the writer to return; the stream sends nothing more.
func (e *Events) closing(ac actor.Context) {
	switch m := ac.Message().(type) {
	case *eventsEnded:
		ac.Stop(e.self)
	case *wire.Deliver:
		e.undeliverable(m)
	case *wire.Attached:
		wire.Tell(e.sys, m.Stream, &wire.Detach{Conn: e.self})
	case *actor.Stopping:
		e.stopping()
	}
}

func (e *Events) stopped(actor.Context) {}

// close ends the event stream (from opening or serving): nothing more is
// queued, the writer returns, the stream is told.
func (e *Events) close() {
	e.state.Become(e.closing)
	e.cancel()
	e.shut()
	if e.stream != nil {
		wire.Tell(e.sys, e.stream, &wire.ConnClosing{Conn: e.self})
	}
}

// slowConsumer ends the stream of a client that does not read: a frame
// waited WriteTimeout for room.
func (e *Events) slowConsumer(actor.Context) {
	e.countSlow()
	e.close()
}

func (e *Events) countSlow() {
	e.d.Metrics.SlowDropped.Inc()
	e.d.Metrics.Disconnects.WithLabelValues(protocol.CloseSlowConsumer).Inc()
}

// stopping ends the actor's account; the stream watches it and lets it go.
func (e *Events) stopping() {
	e.stopTimer()
	e.d.Metrics.SSEClients.Dec()
	e.state.Become(e.stopped)
}

// heartbeatEvent is the heartbeat event with the tip's JSON.
func heartbeatEvent(tip []byte) []byte {
	b := make([]byte, 0, len(tip)+26)
	b = append(b, "event: heartbeat\ndata: "...)
	b = append(b, tip...)
	return append(b, "\n\n"...)
}
