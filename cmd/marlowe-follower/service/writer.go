package service

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/actors/pipeline"
	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/metrics"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/network"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/status"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/stores"
	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/query"
)

// Writer is a process that follows the node and writes (roles all and
// writer): the whole pipeline (follower, processor, history store,
// projection, streaming server) and the query API. On PostgreSQL it first
// takes the writer lease, one writer at a time: while another holds it,
// it stands by, serving as a Reader meanwhile.
type Writer struct {
	*node
	lease *storage.Lease // PostgreSQL's writer lease (nil on SQLite)
}

// standbyStopGrace bounds the stop of a standby's reader at takeover: its
// clients are cut after it (they reconnect to the new holder, durable
// streams resume from their cursors).
const standbyStopGrace = time.Second

func startWriter(ctx context.Context, cfg *config.Config, log *zap.Logger, opts Options, st *stores.Stores) (*Writer, error) {
	start, err := chainsync.ParseStart(cfg.Node.Start)
	if err != nil {
		return nil, fmt.Errorf("node.start: %w", err)
	}
	slots, err := network.NodeSlotConfig(&cfg.Node)
	if err != nil {
		return nil, err
	}
	if err := st.CheckStreams(ctx, cfg.Node.NetworkMagic); err != nil {
		return nil, err
	}
	w := &Writer{node: newNode(cfg, log)}
	var lease metrics.Writer // nil on SQLite
	if pg := st.Postgres(); pg != nil {
		// One writer at a time: wait for the lease (a hot standby while
		// another holds it), taking a new epoch with it, before anything
		// is loaded to resume from.
		if err := w.takeLease(ctx, pg, opts, st); err != nil {
			return nil, err
		}
		lease = w.lease
	}
	w.metrics.RegisterRole(cfg.Role, lease)
	backend := st.History
	if opts.WrapBackend != nil {
		backend = opts.WrapBackend(backend)
	}
	storeCfg := history.DefaultStoreConfig()
	if opts.StoreConfig != nil {
		storeCfg = *opts.StoreConfig
	}
	storeCfg.ObserveCommit = func(d time.Duration) { w.metrics.CommitSeconds.Observe(d.Seconds()) }
	cache := query.NewContractCache(query.DefaultCacheBytes)
	err = w.startPipeline(ctx, pipeline.Config{
		History: backend, Store: storeCfg, Slots: slots,
		Follower: &chainsync.Config{
			SocketPath: cfg.Node.Socket, NetworkMagic: cfg.Node.NetworkMagic, Start: start,
			MinBackoff: cfg.Node.MinBackoff, MaxBackoff: cfg.Node.MaxBackoff, InFlight: storeCfg.InFlight(),
		},
		Contracts:  &contracts.Config{Backend: st.Contracts, Logger: log, OnCommit: cache.Invalidate},
		Streaming:  w.streaming(st.Streams, func() chain.Tip { return w.progress.Snapshot().Tip }),
		Middleware: opts.Middleware,
	})
	if err != nil {
		_ = w.stop(0)
		return nil, err
	}
	w.metrics.RegisterFollower(w.progress)
	w.metrics.RegisterStore(w.pipe.Store.Stats())
	w.metrics.RegisterProcessor(w.pipe.Processor)
	if w.lease != nil {
		go w.watchLease()
	}
	proj := w.pipe.Projection
	if err := w.serve(opts, queryParts{contracts: proj, projection: proj, cache: cache, status: status.Writer{Role: cfg.Role, Version: opts.Version,
		Magic: cfg.Node.NetworkMagic, Progress: w.progress, Store: w.pipe.Store.Stats(), Projection: proj, Lease: w.lease}.Of}); err != nil {
		_ = w.stop(config.DefaultShutdownGrace)
		return nil, err
	}
	log.Info("following", zap.String("socket", cfg.Node.Socket), zap.Uint32("networkMagic", cfg.Node.NetworkMagic),
		zap.String("store", st.Where), zap.Int64("head", w.pipe.Store.Stats().Head.Load()))
	return w, nil
}

// takeLease waits for the writer lease, as a hot standby while another
// process holds it: connected, the stores open and checked, and with a
// port enabled serving as a Reader does on the same stores (/status with
// role and writerLease, /readyz 503 writer_standby). At takeover the
// reader stops (its ports free for the writer's). Taking the lease takes a
// new writer epoch, which fences every write of the previous holder: the
// pipeline, started after this, resumes from what is committed then.
func (w *Writer) takeLease(ctx context.Context, pg *storage.Postgres, opts Options, st *stores.Stores) error {
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var standby *Reader
	var standbyErr error
	// The standby's reader failing for good ends the wait: the process
	// exits with it rather than stand by with its ports dead.
	var readerFailed atomic.Pointer[error]
	lease, err := pg.NewLease(storage.LeaseOptions{
		TTL: w.cfg.Store.WriterLeaseTTL, Holder: storage.ProcessName(), Logger: w.log.Named("lease"),
		Renewed: w.metrics.ObserveLeaseRenewal,
		Ended: func(pid int) {
			w.log.Warn("ended a session of the previous writer whose open transaction blocked the new writer epoch "+
				"(a writer paused mid-commit: its transaction rolls back)", zap.Int("pid", pid))
		},
		Waiting: func(row storage.LeaseRow) {
			w.log.Info("standing by: another process holds the writer lease; this one takes over when the holder's session ends, "+
				"or the lease expires or is let go", zap.String("role", w.cfg.Role), zap.String("holder", row.Holder),
				zap.Int64("epoch", row.Epoch), zap.Duration("expiresIn", row.Remaining()), zap.Bool("sessionWatched", row.Watched()))
			if standby, standbyErr = w.startStandby(waitCtx, opts, st); standbyErr != nil {
				cancel()
				return
			}
			if standby == nil {
				return
			}
			go func() {
				select {
				case err := <-standby.fatal:
					err = fmt.Errorf("standing by: the reader stopped: %w", err)
					readerFailed.Store(&err)
					cancel()
				case <-waitCtx.Done():
				}
			}()
		},
	})
	if err != nil {
		return err
	}
	w.lease = lease
	err = lease.Acquire(waitCtx)
	if p := readerFailed.Load(); p != nil && standbyErr == nil {
		standbyErr = *p
	}
	if standby != nil {
		took := time.Now()
		if err := standby.stop(standbyStopGrace); err != nil {
			w.log.Warn("stopping the standby's reader", zap.Error(err))
		}
		w.log.Info("the standby's reader stopped", zap.Duration("took", time.Since(took)))
	}
	if err == nil {
		err = standbyErr
	}
	if err != nil {
		_ = lease.Release()
		return err
	}
	w.log.Info("holding the writer lease", zap.Int64("epoch", lease.Epoch()), zap.String("holder", lease.Holder()),
		zap.String("taken", lease.Takeover()), zap.Duration("ttl", lease.TTL()), zap.Duration("waited", time.Since(lease.Since())))
	return nil
}

// startStandby starts the reader a standby writer serves while it waits,
// on its configured ports and its stores, without a replica (nil when
// both ports are 0). A failure ends the wait.
func (w *Writer) startStandby(ctx context.Context, opts Options, st *stores.Stores) (*Reader, error) {
	if w.cfg.Query.Port == 0 && w.cfg.Streaming.Port == 0 {
		return nil, nil
	}
	rcfg := *w.cfg
	rcfg.Role, rcfg.Store.ReadDatabaseURL = config.RoleReader, ""
	r, err := startReader(ctx, &rcfg, w.log.Named("standby"), opts, st, &standbyOf{role: w.cfg.Role, lease: w.lease})
	if err != nil {
		return nil, fmt.Errorf("standing by as a reader: %w", err)
	}
	w.log.Info("standing by: serving the query and streaming APIs from the database meanwhile, as a reader",
		zap.String("query", r.queryAddr()), zap.String("streaming", r.streamingAddr()))
	return r, nil
}

// watchLease reports a lost writer lease on fatal: another process took
// it, so this one must stop (its commits are fenced anyway).
func (w *Writer) watchLease() {
	select {
	case <-w.lease.Lost():
	case <-w.pipe.Done():
		return
	}
	select {
	case w.fatal <- w.lease.Err():
	default:
	}
}

// stop takes the pipeline down, committing what it received, then lets
// the writer lease go.
func (w *Writer) stop(timeout time.Duration) error {
	err := w.stopPipeline(timeout)
	if w.lease != nil {
		if lerr := w.lease.Release(); lerr != nil && err == nil {
			err = lerr
		}
	}
	return err
}
