// Package storelock marks a store as in use. A running service holds the
// store's lock shared for as long as it runs; reset asks for it exclusively
// and is refused while any service holds it. With the embedded store the
// lock is an flock(2) on a file in the data directory
// (marlowe-follower.lock); with PostgreSQL it is a session advisory lock on
// a connection of its own, keyed by the session's search_path, so
// stores in other schemas of one database do not see each other's lock.
//
// The lock marks use; it does not exclude a second writer. On PostgreSQL
// the writer lease does (storage.Lease): a second writer
// stands by. On the embedded store WriterFile does: a second service on the same data
// directory is refused at start (history.ErrAnotherWriter); a second
// writer the flock cannot see (a data directory on a file system without
// flock) is stopped at its first conflicting commit.
package storelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history"
)

// FileName is the lock file in the data directory.
const FileName = "marlowe-follower.lock"

// WriterFileName is the embedded store's writer lock file in the data
// directory (WriterFile).
const WriterFileName = "marlowe-follower.writer.lock"

// lockName keys the PostgreSQL advisory lock, with the current schema.
const lockName = "marlowe-follower/in-use/"

// DefaultCheckPeriod is how often a held PostgreSQL lock checks that its
// connection is alive, and takes the lock again after the server restarted.
const DefaultCheckPeriod = 5 * time.Second

var (
	// ErrInUse: Exclusive found the store held by a running service.
	ErrInUse = errors.New("a running marlowe-follower service holds this store")
	// ErrResetRunning: Shared found the store held by a reset.
	ErrResetRunning = errors.New("a reset is running on this store")
)

// Store names a store: a PostgreSQL URL, or else an embedded store's data
// directory.
type Store struct {
	DatabaseURL string
	DataDir     string
}

// String names the store for messages.
func (s Store) String() string {
	if s.DatabaseURL != "" {
		return "the PostgreSQL database"
	}
	return "the data directory " + s.DataDir
}

// Lock is a held store lock.
type Lock struct {
	release sync.Once
	file    *os.File

	// PostgreSQL: the session that holds the lock, and its keeper.
	url    string
	shared bool
	log    *zap.Logger
	period time.Duration
	mu     sync.Mutex
	conn   *pgx.Conn
	stop   chan struct{}
	done   chan struct{}
}

// Options tune Shared.
type Options struct {
	// Logger receives the keeper's warnings (nil: none).
	Logger *zap.Logger
	// CheckPeriod: DefaultCheckPeriod when 0.
	CheckPeriod time.Duration
}

// Shared takes the lock a running service holds: several services may
// hold it at once; a reset cannot take it from them. It fails with
// ErrResetRunning while a reset holds it.
func Shared(ctx context.Context, st Store, opts Options) (*Lock, error) {
	return take(ctx, st, true, opts)
}

// Exclusive takes the lock reset holds while it deletes: it fails with
// ErrInUse while a service holds the store.
func Exclusive(ctx context.Context, st Store) (*Lock, error) {
	return take(ctx, st, false, Options{})
}

func take(ctx context.Context, st Store, shared bool, opts Options) (*Lock, error) {
	refused := ErrInUse
	if shared {
		refused = ErrResetRunning
	}
	if st.DatabaseURL != "" {
		l := &Lock{url: st.DatabaseURL, shared: shared, log: opts.Logger, period: opts.CheckPeriod}
		if l.log == nil {
			l.log = zap.NewNop()
		}
		if l.period <= 0 {
			l.period = DefaultCheckPeriod
		}
		conn, ok, err := l.connect(ctx)
		if err != nil {
			return nil, fmt.Errorf("store lock: %w", err)
		}
		if !ok {
			_ = conn.Close(ctx)
			return nil, fmt.Errorf("%w (%s)", refused, st)
		}
		l.conn = conn
		if shared {
			l.stop, l.done = make(chan struct{}), make(chan struct{})
			go l.keep()
		}
		return l, nil
	}
	if err := os.MkdirAll(st.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("store lock: %w", err)
	}
	path := filepath.Join(st.DataDir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("store lock: %w", err)
	}
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s, %s)", refused, st, FileName)
		}
		return nil, fmt.Errorf("store lock %s: %w", path, err)
	}
	return &Lock{file: f}, nil
}

// WriterFile takes the embedded store's writer lock: an exclusive flock on
// WriterFileName in dataDir, held while the service runs (Release). Only
// one process writes a data directory: while another holds it WriterFile
// fails with history.ErrAnotherWriter, before anything is opened, so the
// running writer goes on and the newcomer exits with the reason (without
// it the two would follow until one's commit found the log moved on, and
// that could be either).
func WriterFile(dataDir string) (*Lock, error) {
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("writer lock: %w", err)
	}
	path := filepath.Join(dataDir, WriterFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("writer lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: another marlowe-follower service writes the data directory %s (it holds %s); "+
				"run one service per store", history.ErrAnotherWriter, dataDir, WriterFileName)
		}
		return nil, fmt.Errorf("writer lock %s: %w", path, err)
	}
	return &Lock{file: f}, nil
}

// connect opens a session and tries the advisory lock on it: ok is false
// when another session holds it in a conflicting mode.
func (l *Lock) connect(ctx context.Context) (*pgx.Conn, bool, error) {
	cfg, err := pgx.ParseConfig(l.url)
	if err != nil {
		return nil, false, fmt.Errorf("database URL: %w", err)
	}
	cfg.RuntimeParams["application_name"] = "marlowe-follower store lock"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, false, err
	}
	fn := "pg_try_advisory_lock"
	if l.shared {
		fn = "pg_try_advisory_lock_shared"
	}
	var ok bool
	err = conn.QueryRow(ctx, `SELECT `+fn+`(hashtextextended($1 || current_setting('search_path'), 0))`, lockName).Scan(&ok)
	if err != nil {
		_ = conn.Close(ctx)
		return nil, false, err
	}
	return conn, ok, nil
}

// keep checks the session of a shared PostgreSQL lock and, when the
// connection was lost (the server restarted), connects again and takes
// the lock again, so that a reset stays refused while the service runs.
func (l *Lock) keep() {
	defer close(l.done)
	t := time.NewTicker(l.period)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.period)
		l.mu.Lock()
		conn := l.conn
		l.mu.Unlock()
		if conn != nil && conn.Ping(ctx) == nil {
			cancel()
			continue
		}
		if conn != nil {
			_ = conn.Close(ctx)
		}
		next, ok, err := l.connect(ctx)
		cancel()
		switch {
		case err != nil:
			l.log.Warn("the store lock's connection is lost; retrying", zap.Error(err))
			next = nil
		case !ok:
			l.log.Warn("the store lock was lost and is held by a reset now; retrying")
			_ = next.Close(context.Background())
			next = nil
		default:
			l.log.Info("the store lock is held again")
		}
		l.mu.Lock()
		l.conn = next
		l.mu.Unlock()
	}
}

// Release lets the lock go; later calls do nothing. A PostgreSQL lock
// whose session is already gone is released without an error.
func (l *Lock) Release() error {
	var err error
	l.release.Do(func() { err = l.let() })
	return err
}

func (l *Lock) let() error {
	if l.file != nil {
		return l.file.Close() // closing the file releases the flock
	}
	if l.stop != nil {
		close(l.stop)
		<-l.done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Unlocked before the session ends: the server ends a session after
	// the client has gone, and would hold the lock until then. Errors are
	// not the caller's: a session that is gone (the server restarted, the
	// connection was cut) holds no lock any more.
	if _, err := l.conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
		l.log.Debug("releasing the store lock", zap.Error(err))
	}
	_ = l.conn.Close(ctx)
	l.conn = nil
	return nil
}
