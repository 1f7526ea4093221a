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

	"github.com/marlowe-follower/follower/actors"
	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/storelock"
	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/pgcontracts"
	"github.com/marlowe-follower/follower/contracts/contractstore/sqlitecontracts"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/sqlitestore"
	"github.com/marlowe-follower/follower/query"
	"github.com/marlowe-follower/follower/query/explorer"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/streamstore/pgstreams"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlitestreams"
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

// OpenContractStore opens the contract projection's store beside the history.
func OpenContractStore(ctx context.Context, cfg *config.Config) (contractstore.Backend, error) {
	var (
		b   contractstore.Backend
		err error
	)
	if cfg.Store.DatabaseURL != "" {
		b, err = pgcontracts.Open(ctx, cfg.Store.DatabaseURL, pgcontracts.Options{})
	} else {
		b, err = sqlitecontracts.Open(ctx, cfg.Store.DataDir, sqlitecontracts.Options{})
	}
	if err != nil {
		return nil, fmt.Errorf("contract store: %w", err)
	}
	if err := b.Init(ctx); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("contract store: %w", err)
	}
	return b, nil
}

// OpenStreamStore opens the durable streams' store beside the history.
func OpenStreamStore(ctx context.Context, cfg *config.Config) (streamstore.Store, error) {
	if cfg.Store.DatabaseURL != "" {
		st, err := pgstreams.Open(ctx, cfg.Store.DatabaseURL, pgstreams.Options{})
		if err != nil {
			return nil, fmt.Errorf("stream store: %w", err)
		}
		return st, nil
	}
	st, err := sqlitestreams.Open(ctx, cfg.Store.DataDir, sqlitestreams.Options{})
	if err != nil {
		return nil, fmt.Errorf("stream store: %w", err)
	}
	return st, nil
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

// Service is a running marlowe-follower.
type Service struct {
	cfg      *config.Config
	log      *zap.Logger
	backend  history.Backend
	system   *actor.ActorSystem
	store    *history.Store
	handle   *history.Handle
	follower *chainsync.Follower
	pids     struct{ follower, processor, store, projection *actor.PID }
	progress *chainsync.Progress
	metrics  *Metrics

	contractStore contractstore.Backend
	projection    *contracts.Store
	query         *query.Server
	streamStore   streamstore.Store
	streaming     *streaming.Server
	lock          *storelock.Lock
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
}

// Start opens the store and starts the pipeline. Stop it with Stop.
func Start(ctx context.Context, cfg *config.Config, log *zap.Logger, opts Options) (*Service, error) {
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
	backend, where, err := OpenBackend(ctx, cfg)
	if err != nil {
		_ = lock.Release()
		return nil, err
	}
	if err := backend.Init(ctx, &history.InitParams{NetworkMagic: cfg.Node.NetworkMagic}); err != nil {
		_ = backend.Close()
		_ = lock.Release()
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
	store, err := history.NewStore(ctx, backend, storeCfg, log)
	if err != nil {
		_ = backend.Close()
		_ = lock.Release()
		return nil, err
	}
	s := &Service{cfg: cfg, log: log, backend: backend, store: store, progress: &chainsync.Progress{}, metrics: metrics, lock: lock}
	metrics.RegisterFollower(s.progress)
	metrics.RegisterStore(store.Stats())
	s.system = actors.NewSystem(log)
	s.pids.store = s.system.Root.Spawn(store.Props())
	s.handle = history.NewHandle(store, s.system, s.pids.store)
	processor := history.NewProcessor(slots, log, s.pids.store)
	metrics.RegisterProcessor(processor)
	s.pids.processor = s.system.Root.Spawn(processor.Props())
	sink := &history.PipelineSink{Root: s.system.Root, Processor: s.pids.processor, Credits: actors.NewCredits(storeCfg.InFlight())}
	s.follower, err = chainsync.NewFollower(chainsync.Config{
		SocketPath: cfg.Node.Socket, NetworkMagic: cfg.Node.NetworkMagic, Start: start,
		MinBackoff: cfg.Node.MinBackoff, MaxBackoff: cfg.Node.MaxBackoff, InFlight: storeCfg.InFlight(),
	}, log, store, classify.New(classify.Options{}), sink, s.progress)
	if err != nil {
		s.stopActors()
		_ = backend.Close()
		_ = lock.Release()
		return nil, err
	}
	s.pids.follower = s.system.Root.Spawn(s.follower.Props())
	if err := s.startStreaming(ctx, &opts); err != nil {
		_ = s.Stop(config.DefaultShutdownGrace)
		return nil, err
	}
	if err := s.startQuery(ctx, opts); err != nil {
		_ = s.Stop(config.DefaultShutdownGrace)
		return nil, err
	}
	log.Info("following", zap.String("socket", cfg.Node.Socket), zap.Uint32("networkMagic", cfg.Node.NetworkMagic),
		zap.String("store", where), zap.Int64("head", store.Stats().Head.Load()))
	return s, nil
}

// startStreaming starts the WebSocket server on its port (unless 0) and
// adds its server-sent events and durable-stream handlers to the query port.
func (s *Service) startStreaming(ctx context.Context, opts *Options) error {
	st, err := OpenStreamStore(ctx, s.cfg)
	if err != nil {
		return err
	}
	s.streamStore = st
	scfg := streaming.DefaultConfig()
	scfg.Addr = ""
	if s.cfg.Streaming.Port != 0 {
		scfg.Addr = net.JoinHostPort(s.cfg.Streaming.Host, strconv.Itoa(s.cfg.Streaming.Port))
	}
	scfg.Token = s.cfg.Streaming.Token
	scfg.Origins = s.cfg.StreamingOrigins()
	srv, err := streaming.New(scfg, streaming.Deps{
		History: s.handle, Streams: st, Logger: s.log, Registerer: s.metrics.Registry,
		Tip: func() chain.Tip { return s.progress.Snapshot().Tip },
	})
	if err != nil {
		return fmt.Errorf("streaming: %w", err)
	}
	if err := srv.Start(ctx); err != nil {
		return fmt.Errorf("streaming.port %d: %w", s.cfg.Streaming.Port, err)
	}
	s.streaming = srv
	if opts.Handlers == nil {
		opts.Handlers = map[string]http.Handler{}
	}
	streams := srv.StreamsHandler()
	opts.Handlers["GET /events"] = srv.EventsHandler()
	opts.Handlers["GET /streams"] = streams
	opts.Handlers["GET /streams/{name}"] = streams
	opts.Handlers["DELETE /streams/{name}"] = streams
	return nil
}

// StreamingAddr returns the WebSocket server's address, or "" when it is off.
func (s *Service) StreamingAddr() string {
	if s.streaming == nil || s.cfg.Streaming.Port == 0 {
		return ""
	}
	if a := s.streaming.Addr(); a != nil {
		return a.String()
	}
	return ""
}

// startQuery starts the contract projection and, unless its port is 0, the
// query API.
func (s *Service) startQuery(ctx context.Context, opts Options) error {
	cb, err := OpenContractStore(ctx, s.cfg)
	if err != nil {
		return err
	}
	s.contractStore = cb
	cache := query.NewContractCache(query.DefaultCacheBytes)
	proj, err := contracts.NewStore(ctx, contracts.Config{History: s.handle, Backend: cb, Logger: s.log, OnCommit: cache.Invalidate})
	if err != nil {
		return err
	}
	s.projection = proj
	s.pids.projection = s.system.Root.Spawn(proj.Props())
	if s.cfg.Query.Port == 0 {
		return nil
	}
	magic := s.cfg.Node.NetworkMagic
	slots, err := NodeSlotConfig(&s.cfg.Node)
	if err != nil {
		return err
	}
	if s.cfg.Query.UI { // the contract explorer at / and /ui/ (query.ui, --no-ui)
		ui, err := explorer.New()
		if err != nil {
			return fmt.Errorf("query.ui: %w", err)
		}
		if opts.Handlers == nil {
			opts.Handlers = map[string]http.Handler{}
		}
		maps.Copy(opts.Handlers, ui.Routes())
	}
	srv, err := query.New(query.Config{
		Addr:      net.JoinHostPort(s.cfg.Query.Host, strconv.Itoa(s.cfg.Query.Port)),
		Contracts: proj, History: s.handle, Projection: proj, Cache: cache, Slots: &slots,
		Status:  func() query.Status { return s.queryStatus(NetworkName(magic), magic, opts.Version, proj) },
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

// Projection returns the contract projection.
func (s *Service) Projection() *contracts.Store { return s.projection }

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

// Fatal receives the error that makes the service unable to go on (another
// writer holds the store, history.ErrAnotherWriter); the caller stops it and
// exits with it.
func (s *Service) Fatal() <-chan error { return s.store.Fatal() }

// Stop takes the pipeline down in order, committing what was received:
// the follower stops reading, the processor and the store drain their
// mailboxes (the store commits its last batch), then the store closes.
func (s *Service) Stop(timeout time.Duration) error {
	done := make(chan struct{})
	go func() {
		s.stopActors()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-time.After(timeout):
		err = errors.New("shutdown took too long; stopping anyway")
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
	if cerr := s.backend.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if cerr := s.lock.Release(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// stopActors stops the streaming and query servers, then the projection,
// then the pipeline from the node's end so that everything received is
// committed.
func (s *Service) stopActors() {
	if s.streaming != nil {
		// Ends in-flight round trips (their records are redelivered later)
		// and the server-sent event streams the query port serves.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.streaming.Shutdown(ctx)
		cancel()
	}
	if s.query != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.query.Shutdown(ctx)
		cancel()
	}
	for _, pid := range []*actor.PID{s.pids.projection, s.pids.follower, s.pids.processor, s.pids.store} {
		if pid != nil {
			_ = s.system.Root.PoisonFuture(pid).Wait()
		}
	}
	s.system.Shutdown()
}
