package storelock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// The writer lock: one process at a time follows the node and writes a
// PostgreSQL store. It is a session advisory lock taken exclusively on a
// connection of its own, keyed like the in-use lock (by the session's
// search_path) but under another name, so that it and the in-use lock
// never conflict: every running service, the writer and its standbys,
// holds the in-use lock shared (reset stays refused), and one of them
// holds the writer lock besides. Whoever takes the writer lock then takes
// a new writer epoch (storage.Postgres.TakeEpoch), which fences the
// writes of a previous holder that still runs.

// writerLockName keys the writer lock, with the current schema.
const writerLockName = "marlowe-follower/writer/"

// WriterApplicationName is the application_name of the writer lock's
// session (pg_stat_activity shows it).
const WriterApplicationName = "marlowe-follower writer lock"

// DefaultWriterPing is how often a held writer lock checks its session.
const DefaultWriterPing = time.Second

// ErrWriterLockLost: the held writer lock's session ended (the connection
// was cut, the server restarted or terminated it) and the lock could not be
// taken again as it was: another session holds it, or Retaken refused it
// (another process took a writer epoch meanwhile). This process must stop
// writing.
var ErrWriterLockLost = errors.New("this process lost the writer lock")

// WriterOptions tune Writer.
type WriterOptions struct {
	// Logger receives the lock's notices (nil: none).
	Logger *zap.Logger
	// Ping is how often the held lock's session is checked, and how long
	// a check may take (DefaultWriterPing when 0).
	Ping time.Duration
	// Waiting, when set, is called once if another session holds the lock
	// and this one starts waiting for it.
	Waiting func()
	// Retry is the wait before connecting again after the waiting session,
	// or the held lock's, failed (DefaultWriterPing when 0).
	Retry time.Duration
	// Retaken, when set, is asked whether a lock taken again after its
	// session failed may be kept: nil keeps it, an error wrapping ErrFenced
	// means another process wrote meanwhile (the lock is lost), any other
	// error is retried. Without it a failed session loses the lock.
	Retaken func(ctx context.Context) error
}

// ErrFenced is what Retaken wraps when another process took the writer
// epoch while the session was gone.
var ErrFenced = errors.New("another process took the writer epoch")

// WriterLock is a held writer lock.
type WriterLock struct {
	cfg     *pgx.ConnConfig
	opts    WriterOptions
	mu      sync.Mutex // conn and pid, replaced when the lock is taken again
	conn    *pgx.Conn
	pid     uint32
	held    atomic.Bool
	log     *zap.Logger
	ping    time.Duration
	since   time.Time
	lost    chan struct{}
	lostErr atomic.Pointer[error]
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// Writer takes the writer lock of the PostgreSQL store at url, waiting for
// as long as another session holds it (a hot standby waits here) or until
// ctx ends. A failed session while waiting is opened again. Once held, the
// lock's session is pinged every opts.Ping: Lost is closed when it fails.
func Writer(ctx context.Context, url string, opts WriterOptions) (*WriterLock, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Ping <= 0 {
		opts.Ping = DefaultWriterPing
	}
	if opts.Retry <= 0 {
		opts.Retry = DefaultWriterPing
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("writer lock: database URL: %w", err)
	}
	cfg.RuntimeParams["application_name"] = WriterApplicationName
	waiting := false
	for {
		conn, err := takeWriter(ctx, cfg, func() {
			if !waiting {
				waiting = true
				if opts.Waiting != nil {
					opts.Waiting()
				}
			}
		})
		if err == nil {
			l := &WriterLock{cfg: cfg, opts: opts, conn: conn, pid: conn.PgConn().PID(), log: opts.Logger, ping: opts.Ping,
				since: time.Now(), lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
			l.held.Store(true)
			go l.keep()
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("writer lock: %w", ctx.Err())
		}
		opts.Logger.Warn("waiting for the writer lock: the session failed; connecting again", zap.Error(err), zap.Duration("after", opts.Retry))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("writer lock: %w", ctx.Err())
		case <-time.After(opts.Retry):
		}
	}
}

// takeWriter opens a session and takes the lock on it: at once when it is
// free, else (after calling waiting) as soon as it is.
func takeWriter(ctx context.Context, cfg *pgx.ConnConfig, waiting func()) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	const key = `hashtextextended($1 || current_setting('search_path'), 0)`
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+key+`)`, writerLockName).Scan(&ok); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	if !ok {
		waiting()
		// Blocks in the server until the holder's session lets it go (or
		// ends); ctx's end cancels it.
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`, writerLockName); err != nil {
			_ = conn.Close(context.Background())
			return nil, err
		}
	}
	return conn, nil
}

// SessionPID is the server process id of the lock's session
// (pg_stat_activity.pid, pg_locks.pid).
func (l *WriterLock) SessionPID() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pid
}

// Held reports whether the lock's session is known alive: false from a
// failed ping until the lock is taken again (or for good once lost).
func (l *WriterLock) Held() bool { return l.held.Load() }

// Since is when the lock was taken.
func (l *WriterLock) Since() time.Time { return l.since }

// Lost is closed when the lock's session failed; Err says why.
func (l *WriterLock) Lost() <-chan struct{} { return l.lost }

// Err is why the lock was lost (nil while held).
func (l *WriterLock) Err() error {
	if p := l.lostErr.Load(); p != nil {
		return *p
	}
	return nil
}

// keep pings the session until Release. When a ping fails the lock is
// taken again on a new session, without waiting, and kept if Retaken
// agrees (nobody wrote meanwhile); retried while the server cannot be
// reached; lost for good when another session holds it or Retaken refuses
// (another process may hold it, with a newer epoch).
func (l *WriterLock) keep() {
	defer close(l.done)
	t := time.NewTicker(l.ping)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.ping)
		l.mu.Lock()
		conn := l.conn
		l.mu.Unlock()
		err := conn.Ping(ctx)
		cancel()
		if err == nil {
			continue
		}
		l.held.Store(false)
		_ = conn.Close(context.Background())
		l.log.Warn("the writer lock's session failed; taking the lock again", zap.Uint32("sessionPid", l.SessionPID()), zap.Error(err))
		if why := l.retake(err); why != nil {
			l.lostErr.Store(&why)
			l.log.Error("the writer lock is lost", zap.Error(why))
			close(l.lost)
			return
		}
		if l.isStopping() {
			return
		}
		l.held.Store(true)
		l.log.Info("the writer lock is held again", zap.Uint32("sessionPid", l.SessionPID()))
	}
}

func (l *WriterLock) isStopping() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// retake takes the lock again after its session failed (cause); it returns
// why the lock is lost, or nil once it holds it again (or Release began).
func (l *WriterLock) retake(cause error) error {
	lost := func(why string) error {
		return fmt.Errorf("%w: its session (server pid %d) failed (%w) and %s", ErrWriterLockLost, l.SessionPID(), cause, why)
	}
	if l.opts.Retaken == nil {
		return lost("it is not taken again")
	}
	for {
		if l.isStopping() {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*l.ping)
		conn, ok, err := l.tryOnce(ctx)
		switch {
		case err != nil:
			l.log.Warn("taking the writer lock again: retrying", zap.Error(err), zap.Duration("after", l.opts.Retry))
		case !ok:
			cancel()
			return lost("another session holds it now")
		default:
			if err = l.opts.Retaken(ctx); err == nil {
				cancel()
				l.mu.Lock()
				l.conn, l.pid = conn, conn.PgConn().PID()
				l.mu.Unlock()
				return nil
			}
			// Unlocked before the session ends: the server would hold it
			// until it noticed the client went.
			_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
			_ = conn.Close(context.Background())
			if errors.Is(err, ErrFenced) {
				cancel()
				return lost("another process wrote meanwhile: " + err.Error())
			}
			l.log.Warn("taking the writer lock again: retrying", zap.Error(err), zap.Duration("after", l.opts.Retry))
		}
		cancel()
		select {
		case <-l.stop:
			return nil
		case <-time.After(l.opts.Retry):
		}
	}
}

// Querier runs one query (a *pgx.Conn or a *pgxpool.Pool).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// WriterHeld reports whether any session holds the writer lock of the
// store q's sessions use (their database and search_path): one look at
// pg_locks, without taking anything. A reader asks it to learn whether
// anybody still writes the log it serves.
func WriterHeld(ctx context.Context, q Querier) (bool, error) {
	// A bigint advisory key shows as classid (its high 32 bits), objid
	// (the low ones) and objsubid 1.
	var held bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND ((l.classid::int8 << 32) | l.objid::int8) = hashtextextended($1 || current_setting('search_path'), 0))`,
		writerLockName).Scan(&held)
	if err != nil {
		return false, fmt.Errorf("writer lock: looking it up in pg_locks: %w", err)
	}
	return held, nil
}

// tryOnce opens a session and tries the lock on it, without waiting.
func (l *WriterLock) tryOnce(ctx context.Context) (*pgx.Conn, bool, error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, false, err
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1 || current_setting('search_path'), 0))`,
		writerLockName).Scan(&ok); err != nil {
		_ = conn.Close(context.Background())
		return nil, false, err
	}
	if !ok {
		_ = conn.Close(context.Background())
	}
	return conn, ok, nil
}

// Release lets the lock go and ends its session; later calls do nothing.
func (l *WriterLock) Release() error {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l.held.Store(false)
		l.mu.Lock()
		conn := l.conn
		l.mu.Unlock()
		if l.Err() == nil && !conn.IsClosed() {
			// Unlocked before the session ends, so the standby need not
			// wait for the server to notice the client went.
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
				l.log.Debug("releasing the writer lock", zap.Error(err))
			}
		}
		_ = conn.Close(ctx)
	})
	return nil
}
