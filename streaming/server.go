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
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/query/origin"
	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/catchup"
	"github.com/marlowe-follower/follower/streaming/conn"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/stream"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// Server is the streaming server. Create it with New; its actor (Props)
// is the server: a parent spawns it (the pipeline's root does), or Start
// spawns it in Deps.System and listens on Config.Addr. Mount it (it is an
// http.Handler for the WebSocket endpoint) or let it listen; stop it with
// Shutdown, or by sending its actor Stop.
//
// The actor tree, with the messages on the arrows:
//
//	server actor ──spawns──▶ connection actor (one per WebSocket)
//	             ──spawns──▶ stream actor (one per subscription or durable stream)
//	connection ──openStream──▶ server ──attach──▶ stream ──attached──▶ connection
//	connection ──reply (ack, nack)──▶ stream
//	stream ──deliverMsg──▶ connection ──undelivered, queuedNotice──▶ stream
//	connection stops ──Terminated──▶ stream: the round trip bound to it ends
//
// What the Server struct holds besides the actor's PID is fixed at New or
// shared by design (the record cache, the queue budget, the tip's JSON);
// every decision about connections and streams is taken in an actor's
// Receive.
type Server struct {
	cfg   Config
	auth  *auth.Authenticator
	deps  Deps
	h     *history.Handle
	store streamstore.Store
	log   *zap.Logger
	m     *metrics

	nextID atomic.Uint64
	tips   *wire.Tips
	enc    wire.RecordCache // the JSON of the records near the head
	budget *conn.Budget     // the frames queued on all connections
	cu     *catchup.Cache   // the pages of the log streams catch up through
	// streams is what the stream actors share. workers are the streams'
	// database workers (dbWorker) and catch-up reads: Done waits for their
	// last jobs. reads is the reads' context, which the server's end
	// cancels (endReads) with the cache's loads.
	streams  stream.Deps
	conns    conn.Deps // what the connection actors share
	workers  sync.WaitGroup
	reads    context.Context
	endReads context.CancelFunc
	// origins are the browser origins allowed on the WebSocket: Config.Origins
	// and, once it listens, the listening address's own.
	origins atomic.Pointer[origin.List]

	sys *actor.ActorSystem
	pid atomic.Pointer[actor.PID] // the server actor, once started
	// view is the running durable streams (the server actor's, published
	// for the HTTP API); running every running stream by its PID's id
	// (the server actor's, for the metrics): a subscription adds and
	// removes one entry, not a copy of them all.
	view    atomic.Pointer[streamsView]
	running sync.Map

	stopOnce sync.Once
	done     chan struct{} // closed when the server actor has stopped
	started  chan error    // Start's: the actor's start-up result
	errMu    sync.Mutex
	stopErr  error // a shutdown cut short

	httpSrv *http.Server
	ln      net.Listener
}

// streamRef is a running stream as the server knows it.
type streamRef struct {
	pid     *actor.PID
	name    string
	owner   string
	durable bool
	wire    protocol.Filter // a durable stream's, for the mismatch check
	mode    protocol.Mode
	stats   *atomic.Pointer[stream.Stats]
}

// New checks the configuration and returns a server. Nothing runs before
// its actor starts.
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
	authn, _ := auth.New(cfg.AllTokens()) // Validate checked them
	s := &Server{cfg: cfg, auth: authn, deps: deps, h: deps.History, store: deps.Streams, log: log.Named("streaming"),
		sys: deps.System, done: make(chan struct{})}
	s.budget = conn.NewBudget(cfg.QueueBudget)
	s.tips = wire.NewTips(deps.Tip, deps.History.Head)
	s.reads, s.endReads = context.WithCancel(context.Background())
	s.cu = catchup.New(deps.History, catchup.Config{MaxBytes: cfg.CatchUpCacheBytes, MaxReads: cfg.CatchUpReads,
		Encode: func(r *record.Record) []byte { return wire.AppendRecord(make([]byte, 0, len(r.Payload)+320), r) }})
	allowed, _ := origin.Parse(cfg.Origins) // Validate checked them
	s.origins.Store(&allowed)
	s.view.Store(&streamsView{})
	s.m = newMetrics(s)
	s.streams = s.streamDeps()
	s.conns = s.connDeps()
	if deps.Registerer != nil {
		if err := s.m.register(deps.Registerer); err != nil {
			return nil, fmt.Errorf("streaming: registering metrics: %w", err)
		}
	}
	return s, nil
}

// Listen binds Config.Addr (nothing when it is empty); the server actor
// serves it once started. An actor started without Listen listens itself.
func (s *Server) Listen() error {
	if s.cfg.Addr == "" || s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("streaming: listen on %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	own := s.origins.Load().With(origin.OfListener(ln.Addr().String())...)
	s.origins.Store(&own)
	return nil
}

// Props returns the server actor's props: spawn it once (a parent's
// supervisor restarts a failed server with a new Server from New). It
// loads the durable streams (each resumes after its last ack when a client
// starts it) and serves the listener; a failure to start is a panic, for
// the supervisor.
//
// A connection or stream actor that fails is not restarted on its own (it
// shares its state with its peers: a connection's subscriptions, a
// stream's round trip): its failure is the server actor's, which its
// parent's supervisor handles. In the pipeline that restarts a fresh
// server, whose durable streams resume from their stored cursors.
func (s *Server) Props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &serverActor{s: s, conns: map[string]connRef{}, refs: map[string]*streamRef{}, durables: map[string]*streamRef{}}
	}, actor.WithSupervisor(escalate))
}

// childProps are the props of a connection or stream actor the server
// actor spawns: the actor itself (made by the server actor, which keeps a
// handle on it), wrapped in Deps.Middleware.
func (s *Server) childProps(a actor.Actor) *actor.Props {
	props := actor.PropsFromProducer(func() actor.Actor { return a })
	if len(s.deps.Middleware) > 0 {
		props = props.Configure(actor.WithReceiverMiddleware(s.deps.Middleware...))
	}
	return props
}

// escalate hands a child's failure to the server actor's supervisor.
var escalate = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.EscalateDirective })

// Start runs the server on its own: it listens on Config.Addr and spawns
// the server actor in Deps.System (the history store's actor system), and
// returns once the durable streams are loaded.
func (s *Server) Start(ctx context.Context) error {
	if s.sys == nil {
		return errors.New("streaming: Deps.System (the history store's actor system) is required to Start")
	}
	if err := s.Listen(); err != nil {
		return err
	}
	s.started = make(chan error, 1)
	pid := s.sys.Root.Spawn(s.Props())
	select {
	case err := <-s.started:
		if err != nil {
			<-s.done
			return err
		}
		return nil
	case <-ctx.Done():
		s.sys.Root.Stop(pid)
		return ctx.Err()
	}
}

// Addr returns the address the server listens on (nil without a listener).
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Done is closed once the server actor has stopped.
func (s *Server) Done() <-chan struct{} { return s.done }

func (s *Server) head() int64 { return s.h.Head() }

// tip returns where the server stands.
func (s *Server) tip() protocol.Tip { return s.tips.Tip() }

// tipJSON returns the tip's JSON, encoded once per change.
func (s *Server) tipJSON() []byte { return s.tips.JSON() }

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

// requestTimeout bounds a request of an HTTP handler to the server actor.
const requestTimeout = 10 * time.Second

// ask sends the server actor a request and waits for its answer; ok false
// when the actor is not running (not started yet, or stopped).
func (s *Server) ask(msg any) (any, bool) {
	pid := s.pid.Load()
	if pid == nil {
		return nil, false
	}
	res, err := s.sys.Root.RequestFuture(pid, msg, requestTimeout).Result()
	if err != nil {
		return nil, false
	}
	return res, true
}

// admit counts a client in, or refuses it (shutting down, or full).
func (s *Server) admit(w http.ResponseWriter) bool {
	res, ok := s.ask(&admitRequest{})
	if !ok || res == admitClosing {
		writeError(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
		return false
	}
	if res == admitFull {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "too_many_connections", "too many connections")
		return false
	}
	return true
}

func (s *Server) leave() {
	if pid := s.pid.Load(); pid != nil {
		wire.Tell(s.sys, pid, &leaveMsg{})
	}
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

// ServeHTTP upgrades a request to the streaming WebSocket; the server
// actor spawns its connection actor, and the handler's goroutine becomes
// the connection's reader.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.originAllowed(w, r) {
		return
	}
	p, ok := s.authenticate(w, r)
	if !ok || !s.admit(w) {
		return
	}
	// The origin is checked above: Accept's own check would also let
	// through any page whose Origin equals the Host header.
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		s.leave()
		s.log.Debug("WebSocket upgrade refused", zap.String("remote", r.RemoteAddr), zap.Error(err))
		return
	}
	ws.SetReadLimit(s.cfg.MaxFrameBytes)
	c := conn.New(&s.conns, ws, s.nextID.Add(1), p, r.RemoteAddr)
	res, ok := s.ask(&connOpened{a: c, q: c.Queue()})
	pid, _ := res.(*actor.PID)
	if !ok || pid == nil {
		c.Cancel()
		s.leave()
		_ = ws.Close(websocket.StatusGoingAway, protocol.CloseShuttingDown)
		return
	}
	c.ReadLoop(s.sys, pid)
}

// Shutdown stops the server: it accepts no more clients, lets every round
// trip in flight end (acked, nacked or its connection gone) while ctx
// allows, then closes every connection ("server shutting down") and ends
// event streams: its actor stops its stream actors, then its connection
// actors, then itself. Durable streams keep their last acknowledged
// cursor. It returns ctx's error when it had to cut round trips short. The
// stream store is not closed: its owner closes it after Shutdown. Later
// calls wait for the first one to finish and return nil.
func (s *Server) Shutdown(ctx context.Context) error {
	first := false
	s.stopOnce.Do(func() { first = true })
	pid := s.pid.Load()
	if first && pid != nil {
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(time.Hour)
		}
		s.sys.Root.Send(pid, &Stop{Deadline: deadline})
	}
	if pid == nil {
		s.finish()
		return nil
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		s.sys.Root.Stop(pid)
		<-s.done
		return ctx.Err()
	}
	if !first {
		return nil
	}
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.stopErr
}

// finish closes what a server that never started holds.
func (s *Server) finish() {
	if s.ln != nil {
		_ = s.ln.Close()
	}
	select {
	case <-s.done:
	default:
		if s.deps.Registerer != nil {
			s.m.unregister(s.deps.Registerer)
		}
		s.endReads()
		s.cu.Close()
		s.workers.Wait()
		close(s.done)
	}
}

// Stop asks the server actor to stop in order: no new clients, the round
// trips in flight end (until Deadline), then the connections close with
// "server shutting down"; then the actor stops. The pipeline's root sends
// it instead of a poison pill.
type Stop struct{ Deadline time.Time }

// httpErrorLogger is the logger of net/http's own errors (a handshake cut
// off, a TLS probe): at WARN at least. A logger already at ERROR or above
// stays there (zap refuses to lower a level, and says so on stderr).
func httpErrorLogger(l *zap.Logger) *zap.Logger {
	if !l.Core().Enabled(zap.WarnLevel) {
		return l
	}
	return l.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
}

// QueuedBytes returns the bytes of frames queued or being written on all
// connections, and the most there were at once since the server started:
// what Config.QueueBudget bounds.
func (s *Server) QueuedBytes() (now, peak int64) { return s.budget.Bytes() }

// connDeps is what the server's connection actors share.
func (s *Server) connDeps() conn.Deps {
	m, cfg := s.m, &s.cfg
	return conn.Deps{
		Config: conn.Config{MaxSubscriptions: cfg.MaxSubscriptions, MaxBatchSize: cfg.MaxBatchSize, MaxBatchTimeout: cfg.MaxBatchTimeout,
			MaxBadFrames: cfg.MaxBadFrames, SendQueueFrames: cfg.SendQueueFrames, SendQueueBytes: cfg.SendQueueBytes,
			WriteTimeout: cfg.WriteTimeout, PingTimeout: cfg.PingTimeout, QueueBudget: cfg.QueueBudget},
		Metrics: &conn.Metrics{Connections: m.connections, Subscribers: m.subscribers, SSEClients: m.sseClients, StaleAcks: m.staleAcks,
			BadFrames: m.badFrames, Disconnects: m.disconnects, SlowDropped: m.slowDropped, BudgetCuts: m.budgetCuts},
		Tips: s.tips, Budget: s.budget, Log: s.log,
	}
}
