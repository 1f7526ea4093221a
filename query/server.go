// Package query is the HTTP/JSON query API (MARLOWE_RT_QUERY_PORT):
// contracts, their steps and history, payouts, withdrawals, status, health,
// readiness, metrics and the OpenAPI document. Reads go straight to the
// storage backends, concurrently; nothing is serialised through an actor.
//
// Every answer says where it stands: the seq and chain point of the
// projection (or history) state it reflects and the node's tip, in headers
// (X-Marlowe-Seq, X-Marlowe-Block-Slot, X-Marlowe-Block-No,
// X-Marlowe-Block-Hash, X-Node-Tip, X-Node-Tip-Block-No) and, for lists, in
// the envelope. minSeq=N waits until the projection has applied seq N
// (read-your-writes), up to Config.MinSeqWait, then answers 503 with
// Retry-After. Bad input gets 400 with {"code","message"}, unknown ids 404.
package query

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// Defaults of Config.
const (
	DefaultMinSeqWait        = 5 * time.Second
	DefaultRequestTimeout    = 15 * time.Second
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxBodyBytes      = 4 << 10
	DefaultReadyMaxSeqLag    = 100
	DefaultReadyMaxBehind    = 10
	DefaultLimit             = api.DefaultLimit
)

// The stores the API reads, as the stores implement them.
type (
	// ContractReader is the read side of the contract projection
	// (contracts.Store; a contractstore.Backend has the same methods).
	ContractReader = api.ContractReader
	// HistoryReader is the read side of the history log (history.Handle).
	HistoryReader = api.HistoryReader
	// Projection is what the API needs from the contract projection
	// (contracts.Store implements it): its position, and waiting for one.
	Projection = api.Projection
)

// Config configures a Server.
type Config struct {
	// Addr is the address to listen on, host:port (":0" picks a port).
	Addr string
	// Contracts reads the contract projection (contracts.Store); History
	// reads the history log (history.Handle, for
	// /contracts/{contractId}/history). The API holds no storage backend:
	// the stores own their reads, which run concurrently on their pools.
	Contracts ContractReader
	History   HistoryReader
	// Projection reports and awaits the projection's position.
	Projection Projection
	// Cache, when set, serves contract lookups from memory; the same cache
	// must be the projection's OnCommit (contracts.Config), or it goes stale.
	Cache *ContractCache
	// Status returns the service's state (node tip, follower point, seqs).
	Status func() Status
	// Slots is the network's slot clock. When set, the runtime view (the
	// Marlowe Runtime's REST API at RuntimePrefix) is served: it shows
	// times, which the native API does not.
	Slots *chain.SlotConfig
	// Metrics, when set, is served at GET /metrics.
	Metrics http.Handler
	// Registerer, when set, gets the request latency histogram.
	Registerer prometheus.Registerer
	// Handlers are mounted beside the API: method-and-path patterns of
	// net/http's ServeMux ("GET /events") to handlers. They get the limits,
	// metrics and logging of the API; a streaming handler lifts the write
	// timeout with http.NewResponseController(w).SetWriteDeadline.
	Handlers map[string]http.Handler
	Logger   *zap.Logger
	// MinSeqWait bounds the wait of minSeq (DefaultMinSeqWait).
	MinSeqWait time.Duration
	// RequestTimeout bounds each request's reads (DefaultRequestTimeout).
	RequestTimeout time.Duration
	// ReadyMaxSeqLag and ReadyMaxBehind: /readyz answers 200 only while
	// the projection is at most ReadyMaxSeqLag records behind the history
	// and the committed point at most ReadyMaxBehind blocks behind the
	// node's tip (besides being connected and committing; see readiness).
	ReadyMaxSeqLag int64
	ReadyMaxBehind uint64
	// Server limits (defaults above).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                                            int
	MaxBodyBytes                                              int64

	// CORS says which browser pages of other origins may use the API and
	// the Handlers (none by default: same-origin pages only).
	CORS CORS
}

func (c *Config) defaults() error {
	if c.Contracts == nil || c.History == nil || c.Projection == nil {
		return errors.New("query: the contract store, the history backend and the projection are required")
	}
	if c.Status == nil {
		c.Status = func() Status { return Status{} }
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	orDefault(&c.MinSeqWait, DefaultMinSeqWait)
	orDefault(&c.RequestTimeout, DefaultRequestTimeout)
	orDefault(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	orDefault(&c.ReadTimeout, DefaultReadTimeout)
	orDefault(&c.WriteTimeout, DefaultWriteTimeout)
	orDefault(&c.IdleTimeout, DefaultIdleTimeout)
	orDefault(&c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	orDefault(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	orDefault(&c.ReadyMaxSeqLag, DefaultReadyMaxSeqLag)
	orDefault(&c.ReadyMaxBehind, DefaultReadyMaxBehind)
	return nil
}

// orDefault sets a setting left at zero (or below) to its default.
func orDefault[T ~int | ~int64 | ~uint64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Server is the query API.
type Server struct {
	cfg     Config
	log     *zap.Logger
	mux     *http.ServeMux
	env     *api.Env
	handler http.Handler
	metrics *prometheus.HistogramVec

	statsState stats // GET /stats: the last answer and the open contracts' values

	mu       sync.Mutex
	srv      *http.Server
	listener net.Listener
	served   chan error
	stopped  bool  // Shutdown ran
	stopErr  error // what it returned
}

// New builds the server and its routes; Start listens.
func New(cfg Config) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger.Named("query"), mux: http.NewServeMux()}
	s.metrics = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "marlowe_query_request_duration_seconds", Help: "Latency of query API requests, by route and status code.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"route", "code"})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.metrics); err != nil {
			return nil, fmt.Errorf("query: registering metrics: %w", err)
		}
		if err := cfg.Registerer.Register(readinessCollector{s}); err != nil {
			return nil, fmt.Errorf("query: registering metrics: %w", err)
		}
	}
	s.env = &api.Env{Contracts: cfg.Contracts, History: cfg.History, Projection: cfg.Projection,
		MinSeqWait: cfg.MinSeqWait, RequestTimeout: cfg.RequestTimeout}
	routes, err := s.routes()
	if err != nil {
		return nil, err
	}
	for _, rt := range routes {
		s.mux.Handle(rt.Pattern, rt.Handler)
	}
	for pattern, h := range cfg.Handlers {
		if err := safeHandle(s.mux, pattern, h); err != nil {
			return nil, err
		}
	}
	if cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", cfg.Metrics)
	}
	s.mux.HandleFunc("/", s.notFound)
	h, err := withCORS(cfg.CORS, s.mux) // preflights are answered before notFound's 404 and 405
	if err != nil {
		return nil, fmt.Errorf("query: CORS: %w", err)
	}
	s.handler = s.middleware(h)
	return s, nil
}

// safeHandle registers an extra handler, turning the mux's panic on a
// conflicting pattern into an error.
func safeHandle(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("query: handler %q: %v", pattern, r)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// Handler returns the API as an http.Handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on Config.Addr and serves in the background.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return errors.New("query: already started (a server starts once)")
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("query: listen on %s: %w", s.cfg.Addr, err)
	}
	s.listener = ln
	s.srv = &http.Server{
		Handler: s.handler, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, ReadTimeout: s.cfg.ReadTimeout,
		WriteTimeout: s.cfg.WriteTimeout, IdleTimeout: s.cfg.IdleTimeout, MaxHeaderBytes: s.cfg.MaxHeaderBytes,
		ErrorLog: zap.NewStdLog(s.log.Named("http")),
	}
	s.served = make(chan error, 1)
	go func() { s.served <- s.srv.Serve(ln) }()
	s.log.Info("serving", zap.String("addr", ln.Addr().String()))
	return nil
}

// Addr returns the address the server listens on ("" before Start).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return ""
	}
	return s.listener.Addr().String()
}

// Shutdown stops accepting connections and waits for the requests in
// flight until ctx ends, then closes what is left. Later calls return the
// first call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil || s.stopped {
		return s.stopErr
	}
	s.stopped = true
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	if serr := <-s.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	s.stopErr = err
	return err
}
