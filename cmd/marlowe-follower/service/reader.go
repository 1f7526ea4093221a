package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/actors/pipeline"
	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/storelock"
	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/contracts/contractstore/sqlcontracts"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/query"
	"github.com/marlowe-follower/follower/streaming"
)

// A reader (role reader) serves the query API, the runtime view, SSE and
// the WebSocket API from the shared PostgreSQL database that a writer
// process fills: no node connection, no follower, processor, history
// writer or projection. Its history store is a history.Mirror that learns
// of the writer's commits by LISTEN/NOTIFY on store.databaseURL and reads
// the records from store.readDatabaseURL (a streaming replica) or, without
// one, from store.databaseURL; the contract projection is read as the
// writer stored it (contracts.View).

// startReader starts a reader process.
func startReader(ctx context.Context, cfg *config.Config, log *zap.Logger, opts Options) (*Service, error) {
	return startReaderFor(ctx, cfg, log, opts, nil)
}

// startReaderFor starts a reader; standby, when set, is the writer lease a
// writer waits for while the reader serves in its place (a hot standby):
// /status then shows the writer's role and writerLease, /readyz is 503
// writer_standby, and marlowe_role is the writer's.
func startReaderFor(ctx context.Context, cfg *config.Config, log *zap.Logger, opts Options, standby *standbyOf) (*Service, error) {
	slots, err := NodeSlotConfig(&cfg.Node)
	if err != nil {
		return nil, err
	}
	// Held while the service runs: reset refuses to delete a store in use.
	lock, err := storelock.Shared(ctx, storelock.Store{DatabaseURL: cfg.Store.DatabaseURL}, storelock.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	// The writer's database: migrated like any process's (migrations wait
	// for each other), and the network checked.
	db, primary, _, err := openStores(ctx, cfg)
	if err != nil {
		_ = lock.Release()
		return nil, err
	}
	s := &Service{cfg: cfg, log: log, db: db, backend: primary, progress: &chainsync.Progress{}, metrics: NewMetrics(),
		fatal: make(chan error, 1), lock: lock}
	s.standby = standby
	if standby != nil {
		s.metrics.RegisterRole(standby.role, standby.writer)
	} else {
		s.metrics.RegisterRole(config.RoleReader, nil)
	}
	fail := func(err error) (*Service, error) {
		s.closeStores()
		return nil, err
	}
	if err := primary.Init(ctx, &history.InitParams{NetworkMagic: cfg.Node.NetworkMagic}); err != nil {
		return fail(err)
	}
	source, ok := primary.(*pgstore.Store)
	pg, pgOK := db.(*storage.Postgres)
	if !ok || !pgOK {
		return fail(errors.New("role reader needs PostgreSQL (store.databaseURL)"))
	}
	read, readDB := history.Backend(primary), storage.DB(db)
	if cfg.Store.ReadDatabaseURL != "" {
		if readDB, read, err = openReplica(ctx, cfg.Store.ReadDatabaseURL); err != nil {
			return fail(err)
		}
		s.readDB, s.readBackend = readDB, read
	}
	// The contracts as the writer's projection stored them, read where the
	// records are; the durable streams' cursors are written, so on the
	// primary.
	cb, err := sqlcontracts.New(ctx, readDB)
	if err != nil {
		return fail(err)
	}
	s.contractStore = cb
	st, err := s.openStreams(ctx, cfg, db, primary)
	if err != nil {
		return fail(err)
	}
	scfg := s.streamingConfig(cfg)
	s.pipe, err = pipeline.Start(ctx, pipeline.Config{
		Logger: log, History: read, Slots: slots, Progress: s.progress,
		Mirror: &pipeline.Mirror{Source: source},
		Streaming: &pipeline.Streaming{Config: scfg, Deps: streaming.Deps{
			Streams: st, Logger: log, Registerer: s.metrics.Registry, Tip: s.writerTip,
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
	s.store, s.handle, s.mirror = s.pipe.Store, s.pipe.Handle, s.pipe.Mirror
	view, err := contracts.NewView(ctx, cb, s.handle, 0)
	if err != nil {
		_ = s.Stop(config.DefaultShutdownGrace)
		return nil, err
	}
	s.view = view
	s.metrics.RegisterStore(s.store.Stats())
	s.metrics.RegisterMirror(s.mirror)
	s.leaseWatch = storage.WatchLease(pg.Pool, log.Named("lease"))
	s.metrics.RegisterLeaseWatch(s.leaseWatch)
	go func() {
		<-s.pipe.Done()
		if err := s.pipe.Err(); err != nil {
			s.fatal <- err
		}
	}()
	if opts.Handlers == nil {
		opts.Handlers = map[string]http.Handler{}
	}
	streams := s.pipe.StreamsHandler()
	opts.Handlers["GET /events"] = s.pipe.EventsHandler()
	opts.Handlers["GET /streams"] = streams
	opts.Handlers["GET /streams/{name}"] = streams
	opts.Handlers["DELETE /streams/{name}"] = streams
	magic := cfg.Node.NetworkMagic
	if err := s.startQuery(opts, queryParts{contracts: cb, projection: view, status: func() query.Status {
		return s.readerStatus(NetworkName(magic), magic, opts.Version)
	}}); err != nil {
		_ = s.Stop(config.DefaultShutdownGrace)
		return nil, err
	}
	log.Info("serving as a reader", zap.Bool("replica", s.mirror.Replica()), zap.Uint32("networkMagic", magic),
		zap.Int64("head", s.handle.Head()))
	return s, nil
}

// openReplica opens the read database, a streaming replica: read only, so
// its schema must be the binary's already (the writer migrates the
// primary, and the replica replays it).
func openReplica(ctx context.Context, url string) (*storage.Postgres, history.Backend, error) {
	pg, err := storage.OpenPostgres(ctx, url, storage.PostgresOptions{ApplicationName: "marlowe-follower reader"})
	if err != nil {
		return nil, nil, fmt.Errorf("store.readDatabaseURL: %w", err)
	}
	lines, err := MigrationLines(storage.DialectPostgres)
	if err != nil {
		_ = pg.Close()
		return nil, nil, err
	}
	status, err := pg.Check(ctx, lines...)
	if err != nil {
		_ = pg.Close()
		return nil, nil, fmt.Errorf("store.readDatabaseURL: %w", err)
	}
	for _, st := range status {
		if st.Stored != st.Latest {
			_ = pg.Close()
			return nil, nil, fmt.Errorf("store.readDatabaseURL: the %s schema is at version %d, this binary's is %d: "+
				"the replica has not replayed the primary's migrations (or is not a replica of store.databaseURL)", st.Line, st.Stored, st.Latest)
		}
	}
	b, err := pgstore.New(pg)
	if err != nil {
		_ = pg.Close()
		return nil, nil, err
	}
	return pg, b, nil
}

// writerTip is the node's tip as the writer stored it.
func (s *Service) writerTip() chain.Tip {
	if s.mirror == nil {
		return chain.Tip{}
	}
	if p := s.mirror.Stats().Writer.Load(); p != nil {
		return p.Tip
	}
	return chain.Tip{}
}

// readerStatus is a reader's state as /status and /readyz see it: the
// writer's progress as stored (committed point and node tip), this
// process's head, and the replica's lag.
func (s *Service) readerStatus(network string, magic uint32, version string) query.Status {
	ms := s.mirror.Stats()
	out := query.Status{Network: network, NetworkMagic: magic, Version: version, Role: config.RoleReader,
		HistorySeq: s.handle.Head(), ProjectionError: s.view.LastError()}
	r := &query.ReaderStatus{Head: out.HistorySeq, Listening: ms.Listening.Load(), Notices: ms.Notices.Load(), Polls: ms.Polls.Load()}
	if p := ms.Writer.Load(); p != nil {
		out.NodeTip, out.Committed, out.Follower = p.Tip, p.Committed, p.Committed
		r.WriterHead = p.Head
	}
	if e := ms.ReadError.Load(); e != nil {
		r.ReadError = *e
	}
	if s.leaseWatch != nil {
		out.WriterLease = leaseStatus(s.leaseWatch.View(), time.Now())
	}
	out.Connected = r.ReadError == ""
	if !out.Connected {
		out.NodeError = r.ReadError
	}
	if out.NodeTip.Point.Slot > 0 {
		out.SyncProgress = min(1, float64(out.Committed.Slot)/float64(out.NodeTip.Point.Slot))
	}
	if out.NodeTip.BlockNo > out.Committed.BlockNo {
		out.BlocksBehind = out.NodeTip.BlockNo - out.Committed.BlockNo
	}
	if s.mirror.Replica() {
		rh := ms.ReadHead.Load()
		r.Replica = &query.ReplicaStatus{Head: rh, LagSeqs: r.WriterHead - rh, LagBytes: ms.LagBytes.Load()}
	}
	out.Reader = r
	if s.standby != nil {
		// A writer standing by: its role, and the lease it waits for
		// (readiness: writer_standby).
		out.Role = s.standby.role
		if out.WriterLease == nil {
			out.WriterLease = &query.WriterLease{}
		}
		out.WriterLease.Writer, out.WriterLease.Since = true, s.standby.writer.waitSince()
	}
	return out
}

// RegisterLeaseWatch exposes a reader's look at the writer lease.
func (m *Metrics) RegisterLeaseWatch(w *storage.LeaseWatch) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "marlowe_reader_writer_present",
			Help: "1 while the writer lease runs, as this reader last read it (0 once it has expired: nobody writes; 0 also before the first read)."},
			func() float64 {
				if v := w.View(); v != nil && !v.Expired(time.Now()) {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "marlowe_reader_writer_lease_renewal_age_seconds",
			Help: "Age of the writer lease's last renewal, as this reader last read it (0 before the first read)."},
			func() float64 {
				if v := w.View(); v != nil {
					return v.RenewalAge(time.Now()).Seconds()
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "marlowe_reader_writer_lease_read_failures_total",
			Help: "Failed reads of the writer lease."}, func() float64 { return float64(w.Failures()) }),
	)
}

// RegisterMirror exposes a reader's counters: its head beside the
// writer's, the commit notices and polls that moved it, the listening
// connection, and a replica's lag.
func (m *Metrics) RegisterMirror(mr *history.Mirror) {
	st := mr.Stats()
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, c interface{ Load() uint64 }) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(c.Load()) })
	}
	writerHead := func() float64 {
		if p := st.Writer.Load(); p != nil {
			return float64(p.Head)
		}
		return 0
	}
	m.Registry.MustRegister(
		gauge("marlowe_reader_writer_head_seq", "The writer's committed head as this reader last noticed or read it.", writerHead),
		gauge("marlowe_reader_lag_records", "Records the writer has committed that this reader has not delivered yet.",
			func() float64 { return max(0, writerHead()-float64(mr.Store().Stats().Head.Load())) }),
		gauge("marlowe_reader_listening", "1 while a connection listens for the writer's commit notices (else the reader polls).",
			func() float64 {
				if st.Listening.Load() {
					return 1
				}
				return 0
			}),
		counter("marlowe_reader_notices_total", "Commit notices received.", &st.Notices),
		counter("marlowe_reader_bad_notices_total", "Notifications on the commit channel that were not commit notices.", &st.BadNotices),
		counter("marlowe_reader_polls_total", "Timed polls of the writer's progress.", &st.Polls),
		counter("marlowe_reader_notice_reads_total", "Reads of new records started by a commit notice.", &st.NoticeReads),
		counter("marlowe_reader_poll_reads_total", "Reads of new records started by a poll (a lost notice, or no listening connection).", &st.PollReads),
		counter("marlowe_reader_retry_reads_total", "Reads of new records started while the replica replayed what the writer committed.", &st.RetryReads),
		counter("marlowe_reader_records_total", "Records read and delivered.", &st.Records),
		counter("marlowe_reader_listen_connects_total", "Listening connections made.", &st.ListenConnects),
		counter("marlowe_reader_listen_failures_total", "Listening connections lost or refused.", &st.ListenFailures),
		counter("marlowe_reader_read_failures_total", "Failed reads of the databases.", &st.ReadFailures),
	)
	if mr.Replica() {
		m.Registry.MustRegister(
			gauge("marlowe_reader_replica_lag_records", "Records the replica is behind the writer's head.",
				func() float64 { return max(0, writerHead()-float64(st.ReadHead.Load())) }),
			gauge("marlowe_reader_replica_lag_bytes", "Bytes of write-ahead log the replica has still to replay (-1: unknown).",
				func() float64 { return float64(st.LagBytes.Load()) }),
		)
	}
}
