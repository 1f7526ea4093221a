// Package service assembles the running marlowe-follower: the storage
// backend, the actor pipeline (follower -> processor -> history store) and
// the servers, and takes them down in order.
package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/actors/pipeline"
	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/storelock"
	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/sqlcontracts"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/sqlitestore"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/query"
	"github.com/marlowe-follower/follower/query/explorer"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
)

// OpenBackend opens the configured store: PostgreSQL when a database URL is
// set, else the embedded SQLite file in the data directory.
func OpenBackend(ctx context.Context, cfg *config.Config) (history.Backend, string, error) {
	if cfg.Store.DatabaseURL != "" {
		b, err := pgstore.Open(ctx, cfg.Store.DatabaseURL, pgstore.Options{})
		if err != nil {
			return nil, "", fmt.Errorf("store.databaseURL: %w", err)
		}
		return b, "postgresql", nil
	}
	if err := os.MkdirAll(cfg.Store.DataDir, 0o750); err != nil {
		return nil, "", fmt.Errorf("store.dataDir %s: %w", cfg.Store.DataDir, err)
	}
	b, err := sqlitestore.Open(ctx, cfg.Store.DataDir, sqlitestore.Options{})
	if err != nil {
		return nil, "", fmt.Errorf("store.dataDir %s: %w", cfg.Store.DataDir, err)
	}
	return b, "sqlite " + filepath.Join(cfg.Store.DataDir, "history.sqlite"), nil
}

// OpenContractStore opens the contract projection's store on the
// process's database, beside the history, and applies its migrations.
func OpenContractStore(ctx context.Context, db storage.DB) (contractstore.Backend, error) {
	b, err := sqlcontracts.New(ctx, db)
	if err != nil {
		return nil, err
	}
	if err := b.Init(ctx); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// OpenStreamStore opens the durable streams' store on the process's
// database, beside the history.
func OpenStreamStore(ctx context.Context, db storage.DB) (streamstore.Store, error) {
	return sqlstreams.New(ctx, db)
}

// NetworkName names a network magic.
func NetworkName(magic uint32) string {
	switch magic {
	case chainsync.MagicMainnet:
		return "mainnet"
	case chainsync.MagicPreprod:
		return "preprod"
	case chainsync.MagicPreview:
		return "preview"
	case devnet.NetworkMagic:
		return "devnet"
	}
	return fmt.Sprint(magic)
}

// SlotConfig returns the slot configuration of the configured network.
func SlotConfig(magic uint32) (chain.SlotConfig, error) {
	if magic == devnet.NetworkMagic {
		return chain.SlotConfig{ZeroSlot: 0, ZeroTimeMillis: devnet.ZeroTimeMillis, SlotLengthMillis: devnet.SlotLengthMillis}, nil
	}
	sc, err := chain.SlotConfigFor(magic)
	if err != nil {
		return sc, fmt.Errorf("node.networkMagic: %w (mainnet 764824073, preprod 1, preview 2, devnet 42)", err)
	}
	return sc, nil
}

// Service is a running marlowe-follower: its storage, the actor pipeline
// (pipeline.Start: follower, processor, history store, projection and
// streaming server under one supervisor) and the query API.
type Service struct {
	cfg      *config.Config
	log      *zap.Logger
	db       storage.DB // the one pool or file set the three stores share
	backend  history.Backend
	pipe     *pipeline.Pipeline
	store    *history.Store
	handle   *history.Handle
	progress *chainsync.Progress
	metrics  *Metrics

	contractStore contractstore.Backend
	projection    *contracts.Store
	query         *query.Server
	streamStore   streamstore.Store
	lock          *storelock.Lock
	writerFile    *storelock.Lock // the embedded store's writer lock (nil on PostgreSQL and for a reader)
	fatal         chan error
	// standby is set on the reader a standby writer runs while it waits
	// for the writer lease (writer.go).
	standby *standbyOf
	// writer is the writer lease of a process writing PostgreSQL (nil on
	// SQLite, whose writer lock is an exclusive flock, and on a reader).
	writer *writerState

	// A reader's (role reader; see startReader): its history store, the
	// projection as stored, and the replica it reads from (nil without).
	mirror      *history.Mirror
	view        *contracts.View
	readDB      storage.DB
	readBackend history.Backend
	leaseWatch  *storage.LeaseWatch // a reader's look at the writer lease
}

// Options tune a service beyond its configuration.
type Options struct {
	// StoreConfig overrides the history store's batching (zero: defaults).
	StoreConfig *history.StoreConfig
	// Version is the binary's version, shown by /status.
	Version string
	// Handlers are mounted on the query port beside the API (streaming's
	// server-sent events and streams).
	Handlers map[string]http.Handler
	// WrapBackend, when set, wraps the history backend the store commits
	// to (tests inject faults with it).
	WrapBackend func(history.Backend) history.Backend
	// Middleware wraps the pipeline's actors' Receive (tests inject
	// faults with it).
	Middleware []actor.ReceiverMiddleware
}

// Start opens the stores and starts the pipeline and the query API (for
// role reader, startReader's). Stop it with Stop.
func Start(ctx context.Context, cfg *config.Config, log *zap.Logger, opts Options) (*Service, error) {
	if cfg.Role == config.RoleReader {
		return startReader(ctx, cfg, log, opts)
	}
	start, err := chainsync.ParseStart(cfg.Node.Start)
	if err != nil {
		return nil, fmt.Errorf("node.start: %w", err)
	}
	slots, err := NodeSlotConfig(&cfg.Node)
	if err != nil {
		return nil, err
	}
	// Held while the service runs: reset refuses to delete a store in use.
	lock, err := storelock.Shared(ctx, storelock.Store{DatabaseURL: cfg.Store.DatabaseURL, DataDir: cfg.Store.DataDir},
		storelock.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	// On the embedded store one process writes a data directory: a second
	// is refused here, before it opens anything (on PostgreSQL the writer
	// lease makes it a standby, takeWriterLease).
	var writerFile *storelock.Lock
	if cfg.Store.DatabaseURL == "" {
		if writerFile, err = storelock.WriterFile(cfg.Store.DataDir); err != nil {
			_ = lock.Release()
			return nil, err
		}
	}
	releaseLocks := func() {
		if writerFile != nil {
			_ = writerFile.Release()
		}
		_ = lock.Release()
	}
	db, backend, where, err := openStores(ctx, cfg)
	if err != nil {
		releaseLocks()
		return nil, err
	}
	if err := backend.Init(ctx, &history.InitParams{NetworkMagic: cfg.Node.NetworkMagic}); err != nil {
		_ = backend.Close()
		_ = db.Close()
		releaseLocks()
		return nil, err
	}
	if opts.WrapBackend != nil {
		backend = opts.WrapBackend(backend)
	}
	storeCfg := history.DefaultStoreConfig()
	if opts.StoreConfig != nil {
		storeCfg = *opts.StoreConfig
	}
	metrics := NewMetrics()
	storeCfg.ObserveCommit = func(d time.Duration) { metrics.CommitSeconds.Observe(d.Seconds()) }
	s := &Service{cfg: cfg, log: log, db: db, backend: backend, progress: &chainsync.Progress{}, metrics: metrics, fatal: make(chan error, 1), lock: lock, writerFile: writerFile}
	if _, ok := db.(*storage.Postgres); ok {
		s.writer = &writerState{}
	}
	fail := func(err error) (*Service, error) {
		s.closeStores()
		return nil, err
	}
	cb, err := OpenContractStore(ctx, db)
	if err != nil {
		return fail(err)
	}
	s.contractStore = cb
	st, err := s.openStreams(ctx, cfg, db, backend)
	if err != nil {
		return fail(err)
	}
	metrics.RegisterRole(cfg.Role, s.writer)
	if pg, ok := db.(*storage.Postgres); ok {
		// One writer at a time: wait for the writer lease (a hot standby
		// while another process holds it), taking a new epoch with it,
		// before anything is loaded to resume from.
		if err := s.takeWriterLease(ctx, pg, opts); err != nil {
			return fail(err)
		}
	}
	cache := query.NewContractCache(query.DefaultCacheBytes)
	scfg := s.streamingConfig(cfg)
	s.pipe, err = pipeline.Start(ctx, pipeline.Config{
		Logger: log, History: backend, Store: storeCfg, Slots: slots, Progress: s.progress,
		Follower: &chainsync.Config{
			SocketPath: cfg.Node.Socket, NetworkMagic: cfg.Node.NetworkMagic, Start: start,
			MinBackoff: cfg.Node.MinBackoff, MaxBackoff: cfg.Node.MaxBackoff, InFlight: storeCfg.InFlight(),
		},
		Contracts: &contracts.Config{Backend: cb, Logger: log, OnCommit: cache.Invalidate},
		Streaming: &pipeline.Streaming{Config: scfg, Deps: streaming.Deps{
			Streams: st, Logger: log, Registerer: metrics.Registry,
			Tip: func() chain.Tip { return s.progress.Snapshot().Tip },
		}},
		Servers:    []pipeline.Server{queryShutdown{s}},
		Middleware: opts.Middleware,
	})
	if err != nil {
		if le := (*pipeline.ListenError)(nil); errors.As(err, &le) {
			err = fmt.Errorf("streaming.port %d: %w", cfg.Streaming.Port, le.Err)
		}
		return fail(err)
	}
	s.store, s.handle, s.projection = s.pipe.Store, s.pipe.Handle, s.pipe.Projection
	metrics.RegisterFollower(s.progress)
	metrics.RegisterStore(s.store.Stats())
	metrics.RegisterProcessor(s.pipe.Processor)
	go func() {
		<-s.pipe.Done()
		if err := s.pipe.Err(); err != nil {
			select {
			case s.fatal <- err:
			default: // the writer lease was lost first
			}
		}
	}()
	if s.writer != nil {
		go s.watchWriterLease()
	}
	if opts.Handlers == nil {
		opts.Handlers = map[string]http.Handler{}
	}
	streams := s.pipe.StreamsHandler()
	opts.Handlers["GET /events"] = s.pipe.EventsHandler()
	opts.Handlers["GET /streams"] = streams
	opts.Handlers["GET /streams/{name}"] = streams
	opts.Handlers["DELETE /streams/{name}"] = streams
	magic := cfg.Node.NetworkMagic
	if err := s.startQuery(opts, queryParts{contracts: s.projection, projection: s.projection, cache: cache, status: func() query.Status {
		return s.queryStatus(NetworkName(magic), magic, opts.Version, s.projection)
	}}); err != nil {
		_ = s.Stop(config.DefaultShutdownGrace)
		return nil, err
	}
	log.Info("following", zap.String("socket", cfg.Node.Socket), zap.Uint32("networkMagic", cfg.Node.NetworkMagic),
		zap.String("store", where), zap.Int64("head", s.store.Stats().Head.Load()))
	return s, nil
}

// openStreams opens the durable streams' store on db (s.streamStore) and
// checks, before any stream is served, that their cursors point into this
// history, the committed log of h: another history, or an older copy than
// the streams (restored from an older backup), is refused.
func (s *Service) openStreams(ctx context.Context, cfg *config.Config, db storage.DB, h history.Backend) (streamstore.Store, error) {
	st, err := OpenStreamStore(ctx, db)
	if err != nil {
		return nil, err
	}
	s.streamStore = st
	head, err := h.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the history's head: %w", err)
	}
	if err := streamstore.CheckHistory(ctx, st, cfg.Node.NetworkMagic, committedLog{h, head}); err != nil {
		return nil, err
	}
	return st, nil
}

// committedLog is the committed history log as streamstore.CheckHistory
// reads it at start, before the pipeline runs.
type committedLog struct {
	b    history.Backend
	head int64
}

func (l committedLog) Head() int64 { return l.head }

// CurrentHead reads the head again: on PostgreSQL other processes (the
// active writer beside its standby, beside a reader) commit while this one
// starts (streamstore.MovingHistoryLog).
func (l committedLog) CurrentHead(ctx context.Context) (int64, error) { return l.b.Head(ctx) }

func (l committedLog) RecordGet(ctx context.Context, seq int64) (*record.Record, error) {
	return l.b.RecordGet(ctx, seq)
}

// queryShutdown stops the query API when the pipeline stops its servers:
// after the streaming server (which ends the event streams the query
// port serves) and before the projection.
type queryShutdown struct{ s *Service }

func (q queryShutdown) Shutdown(ctx context.Context) error {
	if q.s.query == nil {
		return nil
	}
	return q.s.query.Shutdown(ctx)
}

// warnIfOpen says, when no streaming token is set, that anyone who reaches
// the ports may consume, acknowledge and delete every durable stream: a
// warning when a port listens beyond loopback, a notice (INFO) when both
// listen on loopback only, as they do by default then (run --devnet).
func (s *Service) warnIfOpen() {
	if !s.cfg.Open() {
		return
	}
	q, st := s.cfg.ListenHost(s.cfg.Query.Host), s.cfg.ListenHost(s.cfg.Streaming.Host)
	fields := []zap.Field{zap.String("queryHost", q), zap.String("streamingHost", st)}
	if isLoopback(q) && isLoopback(st) {
		s.log.Info("the service is open to this machine: no streaming token is set, so any local process may consume, "+
			"acknowledge and delete every durable stream; set streaming.tokens (MARLOWE_RT_STREAMING_TOKENS)", fields...)
		return
	}
	s.log.Warn("the service is open: no streaming token is set, so anyone who reaches the query or streaming port "+
		"may consume, acknowledge and delete every durable stream; set streaming.tokens (MARLOWE_RT_STREAMING_TOKENS)", fields...)
}

// isLoopback reports whether a listening host is a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// StreamingAddr returns the WebSocket server's address, or "" when it is off.
func (s *Service) StreamingAddr() string {
	if s.cfg.Streaming.Port == 0 {
		return ""
	}
	return s.pipe.StreamingAddr()
}

// queryParts are what the query API reads: the contracts, the
// projection's position, the service's state, and a contract cache (nil
// for none).
type queryParts struct {
	contracts  query.ContractReader
	projection query.Projection
	cache      *query.ContractCache
	status     func() query.Status
}

// startQuery starts the query API, unless its port is 0.
func (s *Service) startQuery(opts Options, parts queryParts) error {
	if s.cfg.Query.Port == 0 {
		return nil
	}
	slots, err := NodeSlotConfig(&s.cfg.Node)
	if err != nil {
		return err
	}
	if s.cfg.Query.UI { // the contract explorer at / and /ui/ (query.ui, --no-ui)
		ui, err := explorer.New()
		if err != nil {
			return fmt.Errorf("query.ui: %w", err)
		}
		maps.Copy(opts.Handlers, ui.Routes())
	}
	srv, err := query.New(query.Config{
		Addr:      net.JoinHostPort(s.cfg.ListenHost(s.cfg.Query.Host), strconv.Itoa(s.cfg.Query.Port)),
		Contracts: parts.contracts, History: s.handle, Projection: parts.projection, Cache: parts.cache, Slots: &slots,
		Status:  parts.status,
		Metrics: s.metrics.Handler(), Registerer: s.metrics.Registry,
		ReadyMaxBehind: s.cfg.Query.ReadyDistance, ReadyMaxSeqLag: int64(min(s.cfg.Query.ReadyProjectionLag, math.MaxInt64)),
		Handlers: opts.Handlers, Logger: s.log,
		CORS: query.CORS{Origins: s.cfg.CORS.Origins},
	})
	if err != nil {
		return fmt.Errorf("query.port: %w", err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("query.port %d: %w", s.cfg.Query.Port, err)
	}
	s.query = srv
	return nil
}

// QueryAddr returns the query API's address, or "" when it is off.
func (s *Service) QueryAddr() string {
	if s.query == nil {
		return ""
	}
	return s.query.Addr()
}

// Projection returns the contract projection (nil in a reader).
func (s *Service) Projection() *contracts.Store { return s.projection }

// Mirror returns a reader's history store (nil unless role reader).
func (s *Service) Mirror() *history.Mirror { return s.mirror }

// ContractStore returns the contract projection's store.
func (s *Service) ContractStore() contractstore.Backend { return s.contractStore }

// Metrics returns the process's metrics.
func (s *Service) Metrics() *Metrics { return s.metrics }

// Handle returns the history store's read side.
func (s *Service) Handle() *history.Handle { return s.handle }

// Progress returns the follower's progress.
func (s *Service) Progress() *chainsync.Progress { return s.progress }

// Backend returns the storage backend.
func (s *Service) Backend() history.Backend { return s.backend }

// Pipeline returns the running actor pipeline.
func (s *Service) Pipeline() *pipeline.Pipeline { return s.pipe }

// Fatal receives the error that makes the service unable to go on: the
// pipeline stopped on its own (another writer holds the store,
// history.ErrAnotherWriter, or an actor that keeps failing), or this
// process lost the writer lease (storage.ErrLeaseLost; its commits
// fenced: history.ErrFenced); the caller
// stops the service and exits with it.
func (s *Service) Fatal() <-chan error { return s.fatal }

// Stop takes the pipeline down in order, committing what was received:
// the streaming server and the query API stop, the projection commits,
// the follower stops reading, the processor and the store drain their
// mailboxes (the store commits its last batch); then the stores close.
func (s *Service) Stop(timeout time.Duration) error {
	err := s.pipe.Stop(timeout)
	if cerr := s.closeStores(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// closeStores closes the storage.
func (s *Service) closeStores() error {
	var err error
	if s.view != nil {
		s.view.Close()
	}
	if s.leaseWatch != nil {
		s.leaseWatch.Close()
	}
	if s.contractStore != nil {
		if cerr := s.contractStore.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if s.streamStore != nil {
		if cerr := s.streamStore.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if s.readBackend != nil {
		if cerr := s.readBackend.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if s.readDB != nil {
		if cerr := s.readDB.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if cerr := s.backend.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if cerr := s.db.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if cerr := s.releaseWriterLease(); cerr != nil && err == nil {
		err = cerr
	}
	if s.writerFile != nil {
		if cerr := s.writerFile.Release(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if cerr := s.lock.Release(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}
