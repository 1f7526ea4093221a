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

	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/stream"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/wire"
)

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
	if spec.Durable {
		a.durables[spec.Name] = ref
	}
	a.publish()
	return ref
}

// publish makes the running streams visible to the HTTP API and metrics.
func (a *serverActor) publish() {
	v := &streamsView{durable: make(map[string]*streamRef, len(a.durables)), all: make([]*streamRef, 0, len(a.refs))}
	for name, ref := range a.durables {
		v.durable[name] = ref
	}
	for _, ref := range a.refs {
		v.all = append(v.all, ref)
	}
	a.s.view.Store(v)
}

// streamsView is the server actor's streams as published.
type streamsView struct {
	durable map[string]*streamRef
	all     []*streamRef
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
			wire.Tell(c.ActorSystem(), cr.pid, &cut{code: websocket.StatusGoingAway, reason: protocol.CloseShuttingDown})
		}
	}
	if a.streamsDone && len(a.conns) == 0 && !a.httpPending {
		c.Stop(a.self)
	}
}
