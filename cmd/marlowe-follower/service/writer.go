package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

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
	return w.held.Load() && lock != nil && lock.Held()
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

// takeWriterLock waits for the writer lock, as a hot standby while another
// process holds it: connected, its migrations applied and its stores
// checked, the query port answering /status, /readyz (503,
// writer_standby), /healthz and /metrics. Once it holds the lock it takes
// a new writer epoch, which fences every write of the previous holder
// (storage.Postgres.TakeEpoch): the pipeline, started after this, resumes
// from what is committed then.
func (s *Service) takeWriterLock(ctx context.Context, pg *storage.Postgres, opts Options) error {
	w := s.writer
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var standby *http.Server
	var standbyErr error
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
			if s.cfg.Query.Port == 0 {
				return
			}
			if standby, standbyErr = s.startStandby(opts); standbyErr != nil {
				cancel()
			}
		},
	})
	if standby != nil {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = standby.Shutdown(sctx)
		scancel()
	}
	if standbyErr != nil {
		return standbyErr
	}
	if err != nil {
		return err
	}
	epoch, err := pg.TakeEpoch(ctx, func(pid int) {
		s.log.Warn("ended a session of the previous writer whose open transaction blocked the new writer epoch "+
			"(a writer paused mid-commit: its transaction rolls back)", zap.Int("pid", pid))
	})
	if err != nil {
		_ = lock.Release()
		return err
	}
	w.mu.Lock()
	w.lock, w.epoch, w.since = lock, epoch, lock.Since()
	w.mu.Unlock()
	w.held.Store(true)
	s.log.Info("holding the writer lock", zap.Int64("epoch", epoch), zap.Uint32("sessionPid", lock.SessionPID()),
		zap.Duration("waited", time.Since(start)))
	return nil
}

// watchWriterLock reports a lost writer lock on Fatal: the process must
// stop writing, since another may hold the lock by now (its commits are
// fenced anyway). A lock whose session failed but that was taken again,
// with nobody writing meanwhile, is not lost (storelock.WriterOptions.Retaken).
func (s *Service) watchWriterLock() {
	lock := s.writer.lock
	select {
	case <-lock.Lost():
	case <-s.pipe.Done():
		return
	}
	s.writer.held.Store(false)
	select {
	case s.fatal <- lock.Err():
	default:
	}
}

// releaseWriterLock lets the writer lock go (after the last commit).
func (s *Service) releaseWriterLock() error {
	if s.writer == nil {
		return nil
	}
	s.writer.mu.Lock()
	lock := s.writer.lock
	s.writer.mu.Unlock()
	s.writer.held.Store(false)
	if lock == nil {
		return nil
	}
	return lock.Release()
}

// standbyStatus is /status on a standby's query port.
type standbyStatus struct {
	Network      string                `json:"network"`
	NetworkMagic uint32                `json:"networkMagic"`
	Version      string                `json:"version"`
	Role         string                `json:"role"`
	HistorySeq   int64                 `json:"historySeq"`
	HistoryError string                `json:"historyError,omitempty"`
	WriterLock   *query.WriterLockJSON `json:"writerLock"`
}

// startStandby serves the query port while the process stands by:
// /status (its role, the lock it waits for and the committed head of the
// shared history), /readyz (503 writer_standby), /healthz and /metrics.
func (s *Service) startStandby(opts Options) (*http.Server, error) {
	addr := net.JoinHostPort(s.cfg.ListenHost(s.cfg.Query.Host), strconv.Itoa(s.cfg.Query.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("query.port %d: %w", s.cfg.Query.Port, err)
	}
	writeJSON := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		lock := s.writer.status()
		out := standbyStatus{Network: NetworkName(s.cfg.Node.NetworkMagic), NetworkMagic: s.cfg.Node.NetworkMagic,
			Version: opts.Version, Role: s.cfg.Role,
			WriterLock: &query.WriterLockJSON{Held: lock.Held, Since: lock.Since.UTC()}}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		head, err := s.backend.Head(ctx)
		if err != nil {
			out.HistoryError = err.Error()
		}
		out.HistorySeq = head
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		lock := s.writer.status()
		msg := "this writer does not hold the writer lock (another process writes): it stands by"
		w.Header().Set(query.HeaderRetryAfter, "5")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reasons": []string{msg},
			"notReady": map[string]any{query.NotReadyWriterStandby: map[string]any{"message": msg, "since": lock.Since.UTC()}}})
	})
	mux.Handle("GET /metrics", s.metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, MaxHeaderBytes: 64 << 10}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn("the standby's query port stopped", zap.Error(err))
		}
	}()
	s.log.Info("standing by: the query port answers /status, /readyz, /healthz and /metrics", zap.String("addr", ln.Addr().String()))
	return srv, nil
}
