package streaming

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/streaming/conn"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/stream"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// The server actor's answers to admitRequest.
type admitAnswer int

const (
	admitOK admitAnswer = iota
	admitClosing
	admitFull
)

// Messages of the server actor.
type (
	admitRequest struct{}
	leaveMsg     struct{}
	// connOpened: spawn a connection actor (a WebSocket's or an event
	// stream's) with its send queue.
	connOpened struct {
		a actor.Actor
		q *conn.SendQueue
	}
	deleteRequest struct{ name string }
	tick          struct{}
	drainDeadline struct{}
	httpDone      struct{ err error }
)

// connRef is a connection actor and its send queue.
type connRef struct {
	pid *actor.PID
	q   *conn.SendQueue
}

// serverActor is the streaming server's actor: the parent of a connection
// actor per WebSocket and a stream actor per subscription or durable
// stream. It admits clients, opens streams (creating durable ones in the
// store), deletes them, sends heartbeats, and stops in order.
type serverActor struct {
	s    *Server
	self *actor.PID

	clients  int                   // WebSocket connections and event streams
	conns    map[string]connRef    // by PID id
	refs     map[string]*streamRef // running streams by PID id
	durables map[string]*streamRef // by name
	heart    *time.Timer

	closing     bool
	streamsDone bool // the streams have stopped: the connections close
	httpPending bool
	drainTimer  *time.Timer
}

func (a *serverActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *admitRequest:
		c.Respond(a.admit())
	case *leaveMsg:
		a.clients--
	case *connOpened:
		a.connOpened(c, m)
	case *wire.OpenStream:
		a.openStream(c, m)
	case *deleteRequest:
		c.Respond(a.deleteStream(c, m.name))
	case *tick:
		a.heartbeats(c)
	case *Stop:
		a.stop(c, m.Deadline)
	case *drainDeadline:
		// Round trips still in flight are cut short.
		a.failStop(context.DeadlineExceeded)
		for _, ref := range a.refs {
			c.Stop(ref.pid)
		}
	case *httpDone:
		a.httpPending = false
		a.failStop(m.err)
	case *actor.Terminated:
		a.terminated(m.Who)
	case *actor.Stopping:
		a.stopping()
		return
	case *actor.Stopped:
		a.s.pid.CompareAndSwap(a.self, nil)
		a.s.finish()
		return
	}
	if a.closing {
		a.advance(c)
	}
}

// admit answers a new client: refused while the server stops or when it
// has MaxConnections.
func (a *serverActor) admit() admitAnswer {
	switch {
	case a.closing:
		return admitClosing
	case a.clients >= a.s.cfg.MaxConnections:
		return admitFull
	}
	a.clients++
	return admitOK
}

// connOpened spawns a connection's actor (none while the server stops)
// and puts its send queue in the queue budget's account.
func (a *serverActor) connOpened(c actor.Context, m *connOpened) {
	if a.closing {
		c.Respond((*actor.PID)(nil))
		return
	}
	s := a.s
	pid := c.Spawn(s.childProps(m.a))
	m.q.Join(c.ActorSystem(), pid)
	a.conns[pid.Id] = connRef{pid: pid, q: m.q}
	c.Respond(pid)
}

// failStop records why the stop was not clean (nil: nothing), for
// Shutdown's answer.
func (a *serverActor) failStop(err error) {
	if err == nil {
		return
	}
	a.s.errMu.Lock()
	a.s.stopErr = err
	a.s.errMu.Unlock()
}

// terminated forgets a connection or a stream that stopped.
func (a *serverActor) terminated(who *actor.PID) {
	if cr, ok := a.conns[who.Id]; ok {
		delete(a.conns, who.Id)
		a.clients--
		cr.q.Leave()
	}
	if ref, ok := a.refs[who.Id]; ok {
		delete(a.refs, who.Id)
		a.s.running.Delete(who.Id)
		if ref.durable && a.durables[ref.name] == ref {
			// The next subscribe starts it again from the store.
			delete(a.durables, ref.name)
			a.publish()
		}
	}
}

// stopping lets go of the listener and the timers as the actor stops.
func (a *serverActor) stopping() {
	if !a.closing {
		a.closing = true
		if a.s.httpSrv != nil {
			_ = a.s.httpSrv.Close()
		}
	}
	if a.heart != nil {
		a.heart.Stop()
	}
	if a.drainTimer != nil {
		a.drainTimer.Stop()
	}
}

// start loads the durable streams (a stream actor each, idle until a
// connection attaches), serves the listener and starts the heartbeats.
func (a *serverActor) start(c actor.Context) {
	s := a.s
	a.self = c.Self()
	if s.sys == nil {
		s.sys = c.ActorSystem()
	}
	fail := func(err error) {
		if s.started != nil {
			s.started <- err
			a.closing = true
			c.Stop(a.self)
			return
		}
		panic(err)
	}
	if s.store != nil {
		if err := a.loadDurables(c); err != nil {
			fail(err)
			return
		}
	}
	if err := s.Listen(); err != nil {
		fail(err)
		return
	}
	if s.ln != nil {
		s.httpSrv = &http.Server{Handler: s, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, MaxHeaderBytes: s.cfg.MaxHeaderBytes,
			ErrorLog: zap.NewStdLog(httpErrorLogger(s.log))}
		srv, ln, log := s.httpSrv, s.ln, s.log
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("streaming server stopped", zap.Error(err))
			}
		}()
		s.log.Info("streaming API listening", zap.String("addr", s.ln.Addr().String()), zap.Bool("auth", !s.auth.Open()),
			zap.Strings("tokens", s.auth.Names()))
	}
	s.pid.Store(a.self)
	a.armHeartbeat(c)
	if s.started != nil {
		s.started <- nil
	}
}

func (a *serverActor) loadDurables(c actor.Context) error {
	s := a.s
	after := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		page, err := s.store.StreamList(ctx, &streamstore.StreamListParams{After: after})
		cancel()
		if err != nil {
			return fmt.Errorf("streaming: loading durable streams: %w", err)
		}
		for i := range page {
			spec, err := streamFromStored(&page[i])
			if err != nil {
				s.log.Error("a stored durable stream cannot be resumed", zap.Error(err))
				continue
			}
			if _, ok := a.durables[spec.Name]; !ok {
				a.spawnStream(c, spec)
			}
		}
		if len(page) < streamstore.MaxList {
			break
		}
		after = page[len(page)-1].Name
	}
	if n := len(a.durables); n > 0 {
		s.log.Info("durable streams loaded", zap.Int("streams", n))
	}
	return nil
}

// spawnStream starts a stream actor.
func (a *serverActor) spawnStream(c actor.Context, spec stream.Spec) *streamRef {
	st := stream.New(&a.s.streams, spec)
	pid := c.Spawn(a.s.childProps(st))
	ref := &streamRef{pid: pid, name: spec.Name, owner: spec.Owner, durable: spec.Durable, wire: spec.Wire, mode: spec.Mode,
		stats: st.Stats()}
	a.refs[pid.Id] = ref
	a.s.running.Store(pid.Id, ref)
	if spec.Durable {
		a.durables[spec.Name] = ref
		a.publish()
	}
	return ref
}

// publish makes the running durable streams visible to the HTTP API (a
// copy, made when they change: they are few; every running stream is in
// Server.running, which changes with each subscription).
func (a *serverActor) publish() {
	v := &streamsView{durable: make(map[string]*streamRef, len(a.durables))}
	for name, ref := range a.durables {
		v.durable[name] = ref
	}
	a.s.view.Store(v)
}

// streamsView is the server actor's durable streams as published.
type streamsView struct {
	durable map[string]*streamRef
}

// openStream finds or makes a subscription's stream and attaches the
// connection to it (the stream answers the connection).
func (a *serverActor) openStream(c actor.Context, m *wire.OpenStream) {
	s := a.s
	if a.closing {
		wire.Tell(c.ActorSystem(), m.Conn, &wire.SubscribeRefused{Name: m.Cmd.Stream, Code: protocol.CodeShuttingDown, Msg: "the server is shutting down"})
		return
	}
	var ref *streamRef
	var err error
	if m.Cmd.Durable {
		ref, err = a.openDurable(c, m)
	} else {
		ref, err = a.newEphemeral(c, m)
	}
	if err != nil {
		var se *subscribeError
		if errors.As(err, &se) {
			wire.Tell(c.ActorSystem(), m.Conn, &wire.SubscribeRefused{Name: m.Cmd.Stream, Code: se.code, Msg: se.msg, Abusive: true})
			return
		}
		s.log.Error("subscribing", zap.String("stream", m.Cmd.Stream), zap.Error(err))
		wire.Tell(c.ActorSystem(), m.Conn, &wire.SubscribeRefused{Name: m.Cmd.Stream, Code: protocol.CodeInternal, Msg: "the subscription could not be set up; try again"})
		return
	}
	wire.Tell(c.ActorSystem(), ref.pid, &wire.Attach{Conn: m.Conn, ID: m.ID, Queue: m.Queue, Name: m.Cmd.Stream})
}

// newEphemeral starts a connection's own stream.
func (a *serverActor) newEphemeral(c actor.Context, m *wire.OpenStream) (*streamRef, error) {
	from, err := protocol.ParseFrom(m.Cmd.From)
	if err != nil {
		return nil, &subscribeError{protocol.CodeBadCursor, err.Error()}
	}
	start, err := a.s.startCursor(m.Filter, from)
	if err != nil {
		return nil, err
	}
	spec := a.s.newStream(m.Cmd, m.Filter)
	spec.Acked = start
	return a.spawnStream(c, spec), nil
}

// deleteStream deletes a durable stream: its connections get an error
// frame (stream_deleted) and lose the subscription, its round trip in
// flight ends, and its stored cursor is removed.
func (a *serverActor) deleteStream(c actor.Context, name string) error {
	s := a.s
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if err := s.store.StreamDelete(ctx, name); err != nil {
		return err
	}
	if ref := a.durables[name]; ref != nil {
		delete(a.durables, name)
		wire.Tell(c.ActorSystem(), ref.pid, &wire.CloseStream{Msg: fmt.Sprintf("durable stream %q was deleted", name)})
		a.publish()
	}
	s.log.Info("durable stream deleted", zap.String("stream", name))
	return nil
}

// heartbeats sends every connection the heartbeat frame with the tip (a
// connection with subscriptions queues it unless its queue is full, and
// each one pings its client), every HeartbeatInterval.
func (a *serverActor) heartbeats(c actor.Context) {
	if a.closing {
		return
	}
	tip := a.s.tip()
	frame := wire.ControlFrame(&protocol.Frame{Type: protocol.TypeHeartbeat, Tip: &tip})
	for _, cr := range a.conns {
		wire.Tell(c.ActorSystem(), cr.pid, &wire.Heartbeat{Frame: frame})
	}
	a.armHeartbeat(c)
}

func (a *serverActor) armHeartbeat(c actor.Context) {
	sys, self := c.ActorSystem(), a.self
	a.heart = time.AfterFunc(a.s.cfg.HeartbeatInterval, func() { wire.Tell(sys, self, &tick{}) })
}

// stop begins the ordered stop: no new clients, event streams end, the
// streams finish their round trips in flight (until deadline) and stop;
// advance goes on from there.
func (a *serverActor) stop(c actor.Context, deadline time.Time) {
	s := a.s
	if a.closing {
		return
	}
	a.closing = true
	if s.httpSrv != nil {
		a.httpPending = true
		srv, sys, self := s.httpSrv, c.ActorSystem(), a.self
		go func() {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			err := srv.Shutdown(ctx)
			cancel()
			wire.Tell(sys, self, &httpDone{err: err})
		}()
	}
	for _, ref := range a.refs {
		wire.Tell(c.ActorSystem(), ref.pid, &wire.DrainStream{})
	}
	sys, self := c.ActorSystem(), a.self
	a.drainTimer = time.AfterFunc(time.Until(deadline), func() { wire.Tell(sys, self, &drainDeadline{}) })
}

// advance takes the ordered stop's next step: once the streams have
// stopped the connections close ("server shutting down"); once they have
// too, the actor stops.
func (a *serverActor) advance(c actor.Context) {
	if !a.streamsDone && len(a.refs) == 0 {
		a.streamsDone = true
		for _, cr := range a.conns {
			wire.Tell(c.ActorSystem(), cr.pid, &conn.Cut{Code: websocket.StatusGoingAway, Reason: protocol.CloseShuttingDown})
		}
	}
	if a.streamsDone && len(a.conns) == 0 && !a.httpPending {
		c.Stop(a.self)
	}
}
