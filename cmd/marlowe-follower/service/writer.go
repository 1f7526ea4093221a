package service

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/query"
)

// writerState is the writer lease of a process that writes a PostgreSQL
// store (role writer, or all): one such process at a time follows; the
// others stand by, waiting for the lease (storage.Postgres.AcquireLease).
type writerState struct {
	mu    sync.Mutex
	lease *storage.Lease
	since time.Time // when the wait began
	held  atomic.Bool
}

// isHeld reports whether this process holds the writer lease now and may
// commit (taken, and renewed in time).
func (w *writerState) isHeld() bool {
	w.mu.Lock()
	lease := w.lease
	w.mu.Unlock()
	return w.held.Load() && lease.Valid()
}

// status is the writer's lease for /status: its own once it holds it
// (held, or lapsed), the wait's start before.
func (w *writerState) status() *query.WriterLease {
	w.mu.Lock()
	lease, since := w.lease, w.since
	w.mu.Unlock()
	if lease == nil {
		return &query.WriterLease{Writer: true, Since: since}
	}
	r, age := lease.Row(), lease.RenewalAge()
	held := w.isHeld()
	return &query.WriterLease{Writer: true, Held: held, Lapsed: !held && w.held.Load() && lease.Err() == nil, Known: true,
		Holder: r.Holder, Epoch: r.Epoch, TTL: r.TTL, RenewedAt: r.RenewedAt, RenewalAge: age, ExpiresIn: r.TTL - age,
		Since: r.AcquiredAt}
}

// epoch is the writer epoch taken with the lease (0 before).
func (w *writerState) epoch() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lease == nil {
		return 0
	}
	return w.lease.Epoch()
}

// waitSince is when the wait for the lease began (a standby).
func (w *writerState) waitSince() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.since
}

// standbyOf is what a standby writer's reader shows of the writer: its
// role and the writer lease it waits for.
type standbyOf struct {
	role   string
	writer *writerState
}

// standbyStopGrace bounds the stop of a standby's reader at takeover: its
// clients are cut after it (they reconnect to the new holder, durable
// streams resume from their cursors).
const standbyStopGrace = time.Second

// takeWriterLease waits for the writer lease, as a hot standby while
// another process holds it: connected, its migrations applied and its
// stores checked, and with a port enabled serving as a reader does
// (startReader: the query API, SSE and the WebSocket API from the
// database; /status with role and writerLease, /readyz 503
// writer_standby). At takeover the reader stops (its ports free for the
// writer's). Taking the lease takes a new writer epoch, which fences every
// write of the previous holder: the pipeline, started after this, resumes
// from what is committed then.
func (s *Service) takeWriterLease(ctx context.Context, pg *storage.Postgres, opts Options) error {
	w := s.writer
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var standby *Service
	var standbyErr error
	// The standby's reader failing for good ends the wait: the process
	// exits with it rather than stand by with its ports dead.
	var readerFailed atomic.Pointer[error]
	start := time.Now()
	w.mu.Lock()
	w.since = start
	w.mu.Unlock()
	lease, err := pg.AcquireLease(waitCtx, storage.LeaseOptions{
		TTL: s.cfg.Store.WriterLeaseTTL, Holder: storage.ProcessName(), Logger: s.log.Named("lease"),
		Ended: func(pid int) {
			s.log.Warn("ended a session of the previous writer whose open transaction blocked the new writer epoch "+
				"(a writer paused mid-commit: its transaction rolls back)", zap.Int("pid", pid))
		},
		Renewed: s.metrics.ObserveLeaseRenewal,
		Waiting: func(row storage.LeaseRow) {
			s.log.Info("standing by: another process holds the writer lease; this one takes over when it expires or is let go",
				zap.String("role", s.cfg.Role), zap.String("holder", row.Holder), zap.Int64("epoch", row.Epoch),
				zap.Duration("expiresIn", row.Remaining()))
			if s.cfg.Query.Port == 0 && s.cfg.Streaming.Port == 0 {
				return
			}
			if standby, standbyErr = s.startStandby(waitCtx, opts); standbyErr != nil {
				cancel()
				return
			}
			go func(r *Service) {
				select {
				case err := <-r.Fatal():
					err = fmt.Errorf("standing by: the reader stopped: %w", err)
					readerFailed.Store(&err)
					cancel()
				case <-waitCtx.Done():
				}
			}(standby)
		},
	})
	if p := readerFailed.Load(); p != nil && standbyErr == nil {
		standbyErr = *p
	}
	if standby != nil {
		took := time.Now()
		if err := standby.Stop(standbyStopGrace); err != nil {
			s.log.Warn("stopping the standby's reader", zap.Error(err))
		}
		s.log.Info("the standby's reader stopped", zap.Duration("took", time.Since(took)))
	}
	if standbyErr != nil {
		if lease != nil {
			_ = lease.Release()
		}
		return standbyErr
	}
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.lease = lease
	w.mu.Unlock()
	w.held.Store(true)
	s.log.Info("holding the writer lease", zap.Int64("epoch", lease.Epoch()), zap.String("holder", lease.Holder()),
		zap.Duration("ttl", lease.TTL()), zap.Duration("waited", time.Since(start)))
	return nil
}

// watchWriterLease reports a lost writer lease on Fatal: another process
// took it, so this one must stop (its commits are fenced anyway).
func (s *Service) watchWriterLease() {
	lease := s.writer.lease
	select {
	case <-lease.Lost():
	case <-s.pipe.Done():
		return
	}
	s.writer.held.Store(false)
	select {
	case s.fatal <- lease.Err():
	default:
	}
}

// releaseWriterLease lets the writer lease go (after the last commit).
func (s *Service) releaseWriterLease() error {
	if s.writer == nil {
		return nil
	}
	s.writer.mu.Lock()
	lease := s.writer.lease
	s.writer.mu.Unlock()
	s.writer.held.Store(false)
	if lease == nil {
		return nil
	}
	return lease.Release()
}

// startStandby starts the reader a standby writer serves while it waits:
// the configuration's ports, the writer's database, no replica.
func (s *Service) startStandby(ctx context.Context, opts Options) (*Service, error) {
	rcfg := *s.cfg
	rcfg.Role, rcfg.Store.ReadDatabaseURL = config.RoleReader, ""
	ropts := opts
	ropts.Handlers = maps.Clone(opts.Handlers)
	r, err := startReaderFor(ctx, &rcfg, s.log.Named("standby"), ropts, &standbyOf{role: s.cfg.Role, writer: s.writer})
	if err != nil {
		return nil, fmt.Errorf("standing by as a reader: %w", err)
	}
	s.log.Info("standing by: serving the query and streaming APIs from the database meanwhile, as a reader",
		zap.String("query", r.QueryAddr()), zap.String("streaming", r.StreamingAddr()))
	return r, nil
}
