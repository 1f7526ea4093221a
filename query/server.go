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
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
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
	DefaultNoWriterGrace     = 5 * time.Second
	DefaultLimit             = 100
)

// Projection is what the API needs from the contract projection
// (contracts.Store implements it).
type Projection interface {
	// Applied returns the position the projection has committed.
	Applied() contractstore.Position
	// WaitFor waits until the projection has applied seq or ctx ends.
	WaitFor(ctx context.Context, seq int64) error
}

// Status is the service's state as /status shows it; Config.Status
// provides it (from chainsync.Progress, history.StoreStats and the
// projection).
type Status struct {
	Network      string            // "mainnet", "preprod", "preview", "devnet" or the magic
	NetworkMagic uint32            //
	Version      string            // the binary's version
	Connected    bool              // the follower is connected to the node
	NodeTip      chain.Tip         // the node's tip
	Follower     chain.BlockHeader // the newest block followed
	SyncProgress float64           // followed slot over the tip's slot, 0..1
	BlocksBehind uint64            // blocks between the followed point and the tip
	HistorySeq   int64             // the newest committed history seq
	// ProjectionError is the projection's newest failure ("" when healthy).
	ProjectionError string

	// Committed is the newest block whose records and checkpoint the
	// history store has committed (Follower is what was received: up to
	// two batches ahead).
	Committed chain.BlockHeader
	// NodeError is why the follower is not connected: its newest
	// connection error ("" while connected).
	NodeError string
	// Handshake is set when the newest attempt failed in the handshake.
	Handshake *HandshakeFailure
	// Waiting is set while the node's tip is behind the follower's point.
	Waiting *NodeWait
	// Diverged is set once following stopped for the operator.
	Diverged *Divergence
	// CommitError is the newest commit failure while commits fail ("" when
	// the last commit succeeded), CommitFailingSince when they started
	// failing and CommitFailures how many failed since the start.
	CommitError        string
	CommitFailingSince time.Time
	CommitFailures     uint64

	// Role is the process's role (all, writer or reader; "" is all).
	Role string
	// WriterLock is set on a process that writes a PostgreSQL store: the
	// writer lock it holds.
	WriterLock *WriterLock
	// Reader is set in a reader process (role reader): it follows the
	// writer's database instead of the node, and NodeTip, Follower and
	// Committed are the writer's progress as the database holds it.
	Reader *ReaderStatus
}

// ReaderStatus is a reader process's position beside the writer's.
type ReaderStatus struct {
	// Head is the newest seq this process has delivered (HistorySeq);
	// WriterHead the writer's committed head as last noticed or read.
	Head, WriterHead int64
	// Listening is set while a connection listens for the writer's commit
	// notices (without one the reader polls).
	Listening bool
	// Notices and Polls count the commit notices received and the timed
	// polls of the writer's progress.
	Notices, Polls uint64
	// ReadError is the newest failed read of the database while reads
	// fail ("" when the last one succeeded).
	ReadError string
	// Writer is whether a session holds the writer lock, as the reader
	// last looked it up (nil until a look succeeded).
	Writer *WriterPresence
	// Replica is set when records are read from a streaming replica.
	Replica *ReplicaStatus
}

// WriterPresence is whether a writer holds the writer lock, as a reader
// sees it in pg_locks.
type WriterPresence struct {
	Present bool      // a session held the writer lock at the last look
	Since   time.Time // since when Present has been so (the first look that found it)
}

// ReplicaStatus is a replica's replay position.
type ReplicaStatus struct {
	// Head is the newest seq the replica has replayed.
	Head int64
	// LagSeqs is how many records the replica is behind the writer's head;
	// LagBytes how many bytes of write-ahead log it has still to replay
	// (-1 when unknown).
	LagSeqs, LagBytes int64
}

// WriterLock is the writer lock of a writing process (see
// storelock.Writer).
type WriterLock struct {
	Held       bool
	Epoch      int64     // the writer epoch taken with the lock
	SessionPID uint32    // the lock session's server process id
	Since      time.Time // when it was taken (held) or the wait began
}

// HandshakeFailure is a handshake the node refused or cut short.
type HandshakeFailure struct {
	Reason  string // network_magic, version, decode, refused, closed or timeout
	Message string
}

// NodeWait is the follower waiting for a node whose tip is behind its point.
type NodeWait struct {
	NodeTip chain.Tip
	Point   chain.BlockHeader
	Since   time.Time
}

// Blocks is how many blocks the node is behind the follower.
func (w *NodeWait) Blocks() uint64 {
	if w.NodeTip.BlockNo >= w.Point.BlockNo {
		return 0
	}
	return w.Point.BlockNo - w.NodeTip.BlockNo
}

// Divergence is why following stopped for the operator, and what to run.
type Divergence struct {
	Reason, Action string
	Since          time.Time
}

// ContractReader is the read side of the contract projection
// (contracts.Store; a contractstore.Backend has the same methods).
type ContractReader interface {
	Ping(ctx context.Context) error
	ContractGet(ctx context.Context, id chain.TxOutRef) (*contractstore.Contract, contractstore.Position, error)
	ContractList(ctx context.Context, p *contractstore.ContractListParams) (*contractstore.ContractPage, error)
	TransactionList(ctx context.Context, p *contractstore.TransactionListParams) (*contractstore.TransactionPage, error)
	TransactionGet(ctx context.Context, contract chain.TxOutRef, tx chain.Hash32) (*contractstore.Transaction, contractstore.Position, error)
	TransactionProducing(ctx context.Context, contract, out chain.TxOutRef) (*contractstore.Transaction, contractstore.Position, error)
	TransactionSpending(ctx context.Context, contract, in chain.TxOutRef) (*contractstore.Transaction, contractstore.Position, error)
	TransactionOfTx(ctx context.Context, tx chain.Hash32) (*contractstore.Transaction, contractstore.Position, error)
	PayoutList(ctx context.Context, p *contractstore.PayoutListParams) (*contractstore.PayoutPage, error)
	PayoutGet(ctx context.Context, id chain.TxOutRef) (*contractstore.Payout, contractstore.Position, error)
	WithdrawalList(ctx context.Context, p *contractstore.WithdrawalListParams) (*contractstore.WithdrawalPage, error)
	WithdrawalGet(ctx context.Context, tx chain.Hash32) (*contractstore.Withdrawal, contractstore.Position, error)
}

// HistoryReader is the read side of the history log (history.Handle): reads
// of committed records only.
type HistoryReader interface {
	// Head is the newest committed seq.
	Head() int64
	RecordList(ctx context.Context, p *record.RecordListParams) ([]record.Record, error)
	RecordGet(ctx context.Context, seq int64) (*record.Record, error)
	ContractGet(ctx context.Context, id chain.TxOutRef) (*record.ContractIndex, error)
}

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
	// NoWriterGrace: a reader's /readyz answers 503 no_writer once no
	// session has held the writer lock for longer than this
	// (DefaultNoWriterGrace; longer than a standby's takeover).
	NoWriterGrace time.Duration
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
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.MinSeqWait, DefaultMinSeqWait)
	def(&c.RequestTimeout, DefaultRequestTimeout)
	def(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	def(&c.NoWriterGrace, DefaultNoWriterGrace)
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.ReadyMaxSeqLag <= 0 {
		c.ReadyMaxSeqLag = DefaultReadyMaxSeqLag
	}
	if c.ReadyMaxBehind == 0 {
		c.ReadyMaxBehind = DefaultReadyMaxBehind
	}
	return nil
}

// Server is the query API.
type Server struct {
	cfg     Config
	log     *zap.Logger
	mux     *http.ServeMux
	handler http.Handler
	metrics *prometheus.HistogramVec

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
	for _, rt := range s.routes() {
		s.mux.Handle(rt.pattern, rt.handler)
	}
	if cfg.Slots != nil {
		if cfg.Slots.SlotLengthMillis <= 0 {
			return nil, errors.New("query: the slot configuration has no slot length")
		}
		for _, rt := range s.runtimeRoutes() {
			s.mux.Handle(rt.pattern, rt.handler)
		}
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
	routes, err := withCORS(cfg.CORS, s.mux) // preflights are answered before notFound's 404 and 405
	if err != nil {
		return nil, fmt.Errorf("query: CORS: %w", err)
	}
	s.handler = s.middleware(routes)
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

// statusWriter records the status code; it keeps Flush and Unwrap so that
// streaming handlers work through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

// WriteHeader records the status code.
func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.code == 0 {
			w.code = http.StatusOK
		}
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// middleware applies the body limit, recovers from panics (a bug, never
// the client's fault: logged, answered 500) and records the latency.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if rec := recover(); rec != nil {
				if rec == http.ErrAbortHandler {
					panic(rec)
				}
				s.log.Error("handler panic", zap.String("path", r.URL.Path), zap.Any("panic", rec), zap.Stack("stack"))
				if sw.code == 0 {
					writeError(sw, http.StatusInternalServerError, "internal", "internal error")
				}
			}
			route := r.Pattern
			if route == "" || route == "/" {
				route = "other"
			}
			code := sw.code
			if code == 0 {
				code = http.StatusOK
			}
			s.metrics.WithLabelValues(route, statusText(code)).Observe(time.Since(start).Seconds())
		}()
		// Every answer says where it stands; handlers that read the store
		// replace these with the position of their read.
		setPosition(sw, s.cfg.Projection.Applied(), s.cfg.Status().NodeTip)
		if r.ContentLength > s.cfg.MaxBodyBytes {
			writeError(sw, http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Sprintf("request bodies are limited to %d bytes", s.cfg.MaxBodyBytes))
			return
		}
		r.Body = http.MaxBytesReader(sw, r.Body, s.cfg.MaxBodyBytes)
		next.ServeHTTP(sw, r)
	})
}

func statusText(code int) string {
	var b [3]byte
	b[0], b[1], b[2] = byte('0'+code/100%10), byte('0'+code/10%10), byte('0'+code%10)
	return string(b[:])
}

// notFound answers paths without a route (404) and known paths asked with
// another method (405).
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		probe := r.Clone(r.Context())
		probe.Method = http.MethodGet
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here: the API is read-only")
			return
		}
	}
	writeError(w, http.StatusNotFound, "not_found", "no such resource: "+strings.TrimSpace(r.URL.Path))
}
