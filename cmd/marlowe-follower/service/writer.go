package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/storelock"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/query"
)

// writerState is the writer lock of a process that writes a PostgreSQL
// store (role writer, or all): one such process at a time follows; the
// others stand by, waiting for the lock (storelock.Writer).
type writerState struct {
	mu    sync.Mutex
	lock  *storelock.WriterLock
	lease *storage.Lease
	epoch int64
	since time.Time // when the wait began, then when the lock was taken
	held  atomic.Bool
}

// isHeld reports whether this process holds the writer lock now: taken,
// and its session alive (not between a failed ping and taking it again).
func (w *writerState) isHeld() bool {
	w.mu.Lock()
	lock := w.lock
	w.mu.Unlock()
	return w.held.Load() && lock != nil && lock.Held() && w.lease.Valid()
}

func (w *writerState) status() *query.WriterLock {
	held := w.isHeld()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := &query.WriterLock{Held: held, Epoch: w.epoch, Since: w.since}
	if w.lock != nil {
		out.SessionPID = w.lock.SessionPID()
	}
	return out
}

// standbyOf is what a standby writer's reader shows of the writer: its
// role and the writer lock it waits for.
type standbyOf struct {
	role   string
	writer *writerState
}

// standbyStopGrace bounds the stop of a standby's reader at takeover: its
// clients are cut after it (they reconnect to the new holder, durable
// streams resume from their cursors).
const standbyStopGrace = time.Second

// takeWriterLock waits for the writer lock, as a hot standby while another
// process holds it: connected, its migrations applied and its stores
// checked, and with a port enabled serving as a reader does (startReader:
// the query API, SSE and the WebSocket API from the database; /status
// with role and writerLock, /readyz 503 writer_standby). At takeover the
// reader stops (its ports free for the writer's). Once it holds the lock
// it takes a new writer epoch, which fences every write of the previous
// holder (storage.Postgres.TakeEpoch): the pipeline, started after this,
// resumes from what is committed then.
func (s *Service) takeWriterLock(ctx context.Context, pg *storage.Postgres, opts Options) error {
	w := s.writer
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var standby *Service
	var standbyErr error
	// The standby's reader failing for good ends the wait: the process
	// exits with it rather than stand by with its ports dead.
	var readerFailed atomic.Pointer[error]
	start := time.Now()
	lock, err := storelock.Writer(waitCtx, s.cfg.Store.DatabaseURL, storelock.WriterOptions{
		Logger: s.log, Ping: s.cfg.Store.WriterLockPing,
		// After the lock's session failed and the lock was taken again:
		// kept only if nobody took a newer epoch meanwhile.
		Retaken: func(ctx context.Context) error {
			if err := pg.StillEpoch(ctx); err != nil {
				if errors.Is(err, record.ErrFenced) {
					return fmt.Errorf("%w: %w", storelock.ErrFenced, err)
				}
				return err
			}
			return nil
		},
		Waiting: func() {
			w.mu.Lock()
			w.since = time.Now()
			w.mu.Unlock()
			s.log.Info("standing by: another process holds the writer lock; this one takes over when it is free",
				zap.String("role", s.cfg.Role))
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
		if lock != nil {
			_ = lock.Release()
		}
		return standbyErr
	}
	if err != nil {
		return err
	}
	lease, err := pg.AcquireLease(ctx, storage.LeaseOptions{
		TTL: s.cfg.Store.WriterLeaseTTL, Holder: storage.HolderName(), Logger: s.log.Named("lease"),
		Ended: func(pid int) {
			s.log.Warn("ended a session of the previous writer whose open transaction blocked the new writer epoch "+
				"(a writer paused mid-commit: its transaction rolls back)", zap.Int("pid", pid))
		},
		Renewed: s.metrics.ObserveLeaseRenewal,
	})
	if err != nil {
		_ = lock.Release()
		return err
	}
	w.mu.Lock()
	w.lock, w.lease, w.epoch, w.since = lock, lease, lease.Epoch(), lock.Since()
	w.mu.Unlock()
	w.held.Store(true)
	s.log.Info("holding the writer lock and lease", zap.Int64("epoch", lease.Epoch()), zap.String("holder", lease.Holder()),
		zap.Uint32("sessionPid", lock.SessionPID()), zap.Duration("ttl", lease.TTL()), zap.Duration("waited", time.Since(start)))
	return nil
}

// watchWriterLock reports a lost writer lock on Fatal: the process must
// stop writing, since another may hold the lock by now (its commits are
// fenced anyway). A lock whose session failed but that was taken again,
// with nobody writing meanwhile, is not lost (storelock.WriterOptions.Retaken).
func (s *Service) watchWriterLock() {
	lock, lease := s.writer.lock, s.writer.lease
	var err error
	select {
	case <-lock.Lost():
		err = lock.Err()
	case <-lease.Lost():
		err = lease.Err()
	case <-s.pipe.Done():
		return
	}
	s.writer.held.Store(false)
	select {
	case s.fatal <- err:
	default:
	}
}

// releaseWriterLock lets the writer lock go (after the last commit).
func (s *Service) releaseWriterLock() error {
	if s.writer == nil {
		return nil
	}
	s.writer.mu.Lock()
	lock, lease := s.writer.lock, s.writer.lease
	s.writer.mu.Unlock()
	s.writer.held.Store(false)
	var err error
	if lease != nil {
		err = lease.Release()
	}
	if lock != nil {
		if lerr := lock.Release(); lerr != nil && err == nil {
			err = lerr
		}
	}
	return err
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
