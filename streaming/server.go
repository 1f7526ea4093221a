// Package streaming is the push API of marlowe-follower: a WebSocket server
// (MARLOWE_RT_STREAMING_PORT) on which one connection carries any number of
// named subscriptions to the history log, each with its filter and starting
// point (origin, tip or a cursor). Delivery is in batches: in ack mode one
// batch is in flight per stream and the next goes out after its ack (at
// least once; a nack or a lost connection sends the same records again);
// in broadcast mode there are no acks (at most once). Durable named streams
// keep their acknowledged cursor in a streamstore.Store and are shared by
// all connections that start them, round trip by round trip. The package
// also serves the history as Server-Sent Events and lists and deletes
// durable streams over HTTP. The wire format is package protocol;
// docs/streaming.md documents it.
//
// Records reach subscribers only through history.Subscription, hence only
// after they are committed, in seq order, snapshot then live (invariants 3
// and 5 of the architecture). No component buffers without bound: a stream
// holds at most one batch in flight and one subscription page, and a
// connection's send queue is bounded; a client that does not read is cut
// off and the follower never waits for one (invariant 6).
package streaming

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/query/origin"
	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

// Server is the streaming server. Create it with New, then either Start it
// on its own port or mount it (it is an http.Handler for the WebSocket
// endpoint) and call Start with an empty Addr; stop it with Shutdown.
type Server struct {
	cfg   Config
	auth  *auth.Authenticator
	deps  Deps
	h     *history.Handle
	store streamstore.Store
	log   *zap.Logger
	m     *metrics

	ctx      context.Context // cancelled at the very end of Shutdown
	cancel   context.CancelFunc
	stopped  chan struct{}  // closed when Shutdown begins
	shutDown chan struct{}  // closed when Shutdown ends
	wg       sync.WaitGroup // dispatchers and their pumps
	// workMu orders wg.Add of goroutines started from outside wg (a
	// dispatcher started by a subscribe) before Shutdown's wg.Wait: noWork
	// is set under it before the wait, and no such Add happens after.
	workMu   sync.Mutex
	noWork   bool
	closing  atomic.Bool
	nextID   atomic.Uint64
	tipCache atomic.Pointer[encodedTip]
	enc      recordCache // the JSON of the records near the head
	budget   queueBudget // the frames queued on all connections
	// origins are the browser origins allowed on the WebSocket: Config.Origins
	// and, once Start listens, the listening address's own.
	origins atomic.Pointer[origin.List]

	mu        sync.Mutex
	conns     map[*conn]struct{}
	clients   int // WebSocket connections and event streams
	durables  map[string]*stream
	ephemeral map[*stream]struct{}
	createMu  sync.Mutex // serializes durable stream creation and deletion

	httpSrv  *http.Server
	ln       net.Listener
	serveWG  sync.WaitGroup
	handlers sync.WaitGroup // WebSocket connections and event streams being served
}

// New checks the configuration and returns a server. Nothing runs before
// Start.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.History == nil {
		return nil, errors.New("streaming: Deps.History is required")
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	authn, _ := auth.New(cfg.AllTokens()) // Validate checked them
	s := &Server{cfg: cfg, auth: authn, deps: deps, h: deps.History, store: deps.Streams, log: log.Named("streaming"),
		ctx: ctx, cancel: cancel, stopped: make(chan struct{}), shutDown: make(chan struct{}),
		conns: map[*conn]struct{}{}, durables: map[string]*stream{}, ephemeral: map[*stream]struct{}{}}
	s.budget = queueBudget{s: s, limit: cfg.QueueBudget}
	allowed, _ := origin.Parse(cfg.Origins) // Validate checked them
	s.origins.Store(&allowed)
	s.m = newMetrics(s)
	if deps.Registerer != nil {
		if err := s.m.register(deps.Registerer); err != nil {
			cancel()
			return nil, fmt.Errorf("streaming: registering metrics: %w", err)
		}
	}
	return s, nil
}

// Start loads the durable streams (each resumes after its last ack when a
// client starts it) and, when Config.Addr is set, listens there.
func (s *Server) Start(ctx context.Context) error {
	if s.store != nil {
		if err := s.loadDurables(ctx); err != nil {
			return err
		}
	}
	s.wg.Add(1)
	go s.heartbeats()
	if s.cfg.Addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("streaming: listen on %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	own := s.origins.Load().With(origin.OfListener(ln.Addr().String())...)
	s.origins.Store(&own)
	s.httpSrv = &http.Server{Handler: s, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, MaxHeaderBytes: s.cfg.MaxHeaderBytes,
		ErrorLog: zap.NewStdLog(httpErrorLogger(s.log))}
	s.serveWG.Add(1)
	go func() {
		defer s.serveWG.Done()
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("streaming server stopped", zap.Error(err))
		}
	}()
	s.log.Info("streaming API listening", zap.String("addr", ln.Addr().String()), zap.Bool("auth", !s.auth.Open()),
		zap.Strings("tokens", s.auth.Names()))
	return nil
}

func (s *Server) loadDurables(ctx context.Context) error {
	after := ""
	for {
		page, err := s.store.StreamList(ctx, &streamstore.StreamListParams{After: after})
		if err != nil {
			return fmt.Errorf("streaming: loading durable streams: %w", err)
		}
		for i := range page {
			st, err := s.streamFromStored(&page[i])
			if err != nil {
				s.log.Error("a stored durable stream cannot be resumed", zap.Error(err))
				continue
			}
			s.mu.Lock()
			if _, ok := s.durables[st.name]; !ok {
				s.durables[st.name] = st
			}
			s.mu.Unlock()
		}
		if len(page) < streamstore.MaxList {
			break
		}
		after = page[len(page)-1].Name
	}
	s.mu.Lock()
	n := len(s.durables)
	s.mu.Unlock()
	if n > 0 {
		s.log.Info("durable streams loaded", zap.Int("streams", n))
	}
	return nil
}

// Addr returns the address Start listens on (nil without a listener).
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

func (s *Server) isClosing() bool { return s.closing.Load() }

// addWork counts in a goroutine started from outside s.wg, or returns false
// once the server is shutting down.
func (s *Server) addWork() bool {
	s.workMu.Lock()
	defer s.workMu.Unlock()
	if s.noWork || s.closing.Load() {
		return false
	}
	s.wg.Add(1)
	return true
}

func (s *Server) head() int64 { return s.h.Head() }

// tip returns where the server stands.
func (s *Server) tip() protocol.Tip {
	var t protocol.Tip
	if s.deps.Tip != nil {
		t = protocol.MakeTip(s.deps.Tip(), 0)
	}
	t.Seq = s.head()
	return t
}

// tipJSON returns the tip's JSON, encoded once per change.
func (s *Server) tipJSON() []byte {
	t := s.tip()
	if c := s.tipCache.Load(); c != nil && c.tip == t {
		return c.js
	}
	js, _ := json.Marshal(t)
	s.tipCache.Store(&encodedTip{tip: t, js: js})
	return js
}

// encodedTip is a tip and its JSON.
type encodedTip struct {
	tip protocol.Tip
	js  []byte
}

// heartbeats sends every connection with subscriptions a heartbeat frame
// with the tip, and pings every connection, each HeartbeatInterval. A
// connection whose queue is full skips the heartbeat (it has frames to
// read); one that does not answer the ping is closed.
func (s *Server) heartbeats() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stopped:
			return
		case <-t.C:
		}
		tip := s.tip()
		frame := controlFrame(&protocol.Frame{Type: protocol.TypeHeartbeat, Tip: &tip})
		s.mu.Lock()
		conns := make([]*conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		for _, c := range conns {
			if c.subscribed() {
				_ = c.q.tryPush(frame, false)
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				c.ping()
			}()
		}
	}
}

// authenticate returns the request's principal (auth.Anonymous when no
// token is configured), or answers 401 and returns false.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	p, ok := s.auth.Authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="marlowe-follower"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
	}
	return p, ok
}

// Open reports whether the server takes no token: anyone who reaches it
// may use every stream.
func (s *Server) Open() bool { return s.auth.Open() }

// admit counts a client in, or refuses it (shutting down, or full).
func (s *Server) admit(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing.Load():
		writeError(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
		return false
	case s.clients >= s.cfg.MaxConnections:
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "too_many_connections", "too many connections")
		return false
	}
	s.clients++
	s.handlers.Add(1)
	return true
}

func (s *Server) leave() {
	s.mu.Lock()
	s.clients--
	s.mu.Unlock()
	s.handlers.Done()
}

// originAllowed checks a browser's Origin against the allowed origins
// (never against the Host header, which a DNS-rebinding page controls),
// or answers 403.
func (s *Server) originAllowed(w http.ResponseWriter, r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || s.origins.Load().Allows(o) {
		return true
	}
	s.log.Debug("WebSocket origin refused", zap.String("remote", r.RemoteAddr), zap.String("origin", o))
	writeError(w, http.StatusForbidden, "origin_not_allowed", fmt.Sprintf("origin %q may not open a WebSocket here: the streaming.origins setting (MARLOWE_RT_STREAMING_ORIGINS; "+
		"by default cors.origins) lists the allowed browser origins", o))
	return false
}

// ServeHTTP upgrades a request to the streaming WebSocket and serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.originAllowed(w, r) {
		return
	}
	p, ok := s.authenticate(w, r)
	if !ok || !s.admit(w, r) {
		return
	}
	defer s.leave()
	// The origin is checked above: Accept's own check would also let
	// through any page whose Origin equals the Host header.
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		s.log.Debug("WebSocket upgrade refused", zap.String("remote", r.RemoteAddr), zap.Error(err))
		return
	}
	c := newConn(s, ws, s.nextID.Add(1), r.RemoteAddr)
	c.principal = p
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		_ = ws.Close(websocket.StatusGoingAway, protocol.CloseShuttingDown)
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.m.connections.Inc()
	c.log.Debug("connected")
	c.serve()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.m.connections.Dec()
}

// Shutdown stops the server: it accepts no more clients, lets every round
// trip in flight end (acked, nacked or its connection gone) while ctx
// allows, then closes every connection ("server shutting down") and ends
// event streams. Durable streams keep their last acknowledged cursor. It
// returns ctx's error when it had to cut round trips short. The stream
// store is not closed: its owner closes it after Shutdown. Later calls
// wait for the first one to finish and return nil.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock() // admit counts clients in under s.mu: none after this
	first := s.closing.CompareAndSwap(false, true)
	s.mu.Unlock()
	if !first {
		select {
		case <-s.shutDown:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	defer close(s.shutDown)
	close(s.stopped)
	var err error
	if s.httpSrv != nil {
		if e := s.httpSrv.Shutdown(ctx); e != nil {
			err = e
		}
	}
	// Round trips in flight finish; no new batch goes out.
	var ds []*dispatcher
	for _, st := range s.allStreams() {
		if d := st.drain(); d != nil {
			ds = append(ds, d)
		}
	}
	for _, d := range ds {
		select {
		case <-d.exited:
		case <-ctx.Done():
			d.stop()
			err = ctx.Err()
		}
	}
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close(websocket.StatusGoingAway, protocol.CloseShuttingDown)
	}
	s.workMu.Lock()
	s.noWork = true
	s.workMu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		s.handlers.Wait()
		s.serveWG.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.cancel()
	<-done
	if s.deps.Registerer != nil {
		s.m.unregister(s.deps.Registerer)
	}
	return err
}

// allStreams returns the durable streams and the running ephemeral ones.
func (s *Server) allStreams() []*stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*stream, 0, len(s.durables)+len(s.ephemeral))
	for _, st := range s.durables {
		out = append(out, st)
	}
	for st := range s.ephemeral {
		out = append(out, st)
	}
	return out
}

// httpErrorLogger is the logger of net/http's own errors (a handshake cut
// off, a TLS probe): at WARN at least. A logger already at ERROR or above
// stays there (zap refuses to lower a level, and says so on stderr).
func httpErrorLogger(l *zap.Logger) *zap.Logger {
	if !l.Core().Enabled(zap.WarnLevel) {
		return l
	}
	return l.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
}
