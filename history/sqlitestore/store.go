// Package sqlitestore is the embedded SQLite backend of the history log
// (history.Backend): one file, history.sqlite, in the data directory
// (MARLOWE_RT_DATA_DIR), through the pure-Go modernc.org/sqlite driver (no
// cgo). The database runs in WAL mode: one writer connection takes the
// commits (BEGIN IMMEDIATE) while a pool of read-only connections serves
// readers from their own snapshots, so reads never wait for the writer.
// Commits are durable when Commit returns (synchronous=FULL: the WAL is
// synced at every commit, since a record must never be seen by a
// subscriber and then lost). Foreign keys are enforced. The file is one of
// the process's SQLite file set (storage.SQLite), opened once and shared.
package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/internal/sqlcommon"
	"github.com/marlowe-follower/follower/history/storage"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// FileName is the database file Open creates in the data directory.
const FileName = "history.sqlite"

// File is the history's SQLite file: commits are durable when they return
// (synchronous=FULL: a record must never be seen by a subscriber and then
// lost), foreign keys are enforced, and the page caches are 64 MiB for the
// writer, whose index inserts (keys are hashes) land on pages all over the
// file, and 16 MiB for each reader.
var File = storage.FileSpec{Name: FileName, Synchronous: "FULL", ForeignKeys: true, WriteCacheKiB: 65536, ReadCacheKiB: 16384}

// Line is the history's migration line on SQLite (its versions in
// schema_migrations of history.sqlite).
func Line() (storage.Line, error) {
	return storage.NewLine("history", "schema_migrations", migrationFS, "migrations", File)
}

// Defaults of Options.
const (
	DefaultReadConns   = 4
	DefaultBusyTimeout = 10 * time.Second
)

// Options tune Open. The zero value is a good default.
type Options struct {
	// ReadConns is the number of read-only connections (DefaultReadConns
	// when 0): how many reads run at once.
	ReadConns int
	// BusyTimeout is how long a connection waits for a lock held by another
	// one, such as a second process opening the same file (DefaultBusyTimeout
	// when 0).
	BusyTimeout time.Duration
}

// Store is the SQLite history backend. It is safe for concurrent use: one
// writer (Commit) and any number of readers.
type Store struct {
	sqlcommon.Reads  // Head, RecordRecent, RecordGet, ContractGet, CheckpointGet
	sqlcommon.Schema // SchemaVersion, Migrate, Init
	lite             *storage.SQLite
	own              bool // Close closes lite
	path             string
	write            *sql.DB // one connection
	read             *sql.DB // read-only connections
	errs             storage.Errors

	stmtsMu sync.Mutex
	stmts   map[string]*sql.Stmt // the commit's statements, prepared on the writer
}

var _ history.Backend = (*Store)(nil)

// Open opens (creating them if needed) the data directory dir and the
// database file in it, as a file set of the store's own. It does not touch
// the schema: call Init (or Migrate) next.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	if opts.ReadConns <= 0 {
		opts.ReadConns = DefaultReadConns
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	lite, err := storage.OpenSQLite(dir, storage.SQLiteOptions{BusyTimeout: opts.BusyTimeout})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	spec := File
	spec.ReadConns = opts.ReadConns
	s, err := newStore(ctx, lite, spec)
	if err != nil {
		_ = lite.Close()
		return nil, err
	}
	s.own = true
	return s, nil
}

// New returns the store on history.sqlite of the process's file set lite
// (opened there the first time), which it shares with the other stores:
// Close leaves the file open. It does not touch the schema.
func New(ctx context.Context, lite *storage.SQLite) (*Store, error) {
	return newStore(ctx, lite, File)
}

func newStore(ctx context.Context, lite *storage.SQLite, spec storage.FileSpec) (*Store, error) {
	line, err := Line()
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	f, err := lite.File(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	s := &Store{lite: lite, path: f.Path, write: f.Write, read: f.Read, stmts: make(map[string]*sql.Stmt)}
	s.errs = sqlcommon.NewErrors("sqlitestore")
	s.Schema = sqlcommon.Schema{DB: s.lite, Line: line, Errs: &s.errs, RecordNetwork: s.recordNetwork}
	s.Reads = sqlcommon.Reads{Dialect: sqlcommon.SQLite, Pool: querier{s.read}, Snapshot: s.snapshot, Errs: &s.errs}
	return s, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes the commit's statements (and the file when the store
// opened it). Calls after Close return history.ErrBackendClosed.
func (s *Store) Close() error {
	if !s.errs.Close() {
		return nil
	}
	s.stmtsMu.Lock()
	var errs []error
	for _, st := range s.stmts {
		errs = append(errs, st.Close())
	}
	s.stmts = nil
	s.stmtsMu.Unlock()
	if s.own {
		errs = append(errs, s.lite.Close())
	}
	return errors.Join(errs...)
}

// check refuses calls on a closed store.
func (s *Store) check() error { return s.errs.Check() }

// translate turns a driver error into the store's (storage.Errors):
// not-found and duplicate-seq errors become the history sentinels; every
// error is wrapped with the operation that failed.
func (s *Store) translate(op string, err error) error { return s.errs.Translate(op, err) }

// inTx runs fn in a write transaction (BEGIN IMMEDIATE on the writer
// connection) and commits it, or rolls it back when fn fails.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return tx.Commit()
}

// ignoreDone drops the error of rolling back a transaction that is over.
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// recordNetwork stores the network magic unless one is stored, and
// returns the one stored (sqlcommon.Schema.Init).
func (s *Store) recordNetwork(ctx context.Context, magic int64) (stored int64, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (id, network_magic) VALUES (1, ?) ON CONFLICT (id) DO NOTHING`, magic); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT network_magic FROM meta WHERE id = 1`).Scan(&stored)
	})
	return stored, err
}
