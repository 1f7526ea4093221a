// Package sqlitecontracts is the embedded SQLite backend of the contract
// projection (contractstore.Backend), through the pure-Go modernc.org/sqlite
// driver. It keeps its own file, contracts.sqlite, in the data directory,
// beside the history's history.sqlite: the projection's writer then never
// contends with the history writer for SQLite's single write lock. The
// database runs in WAL mode with one writer connection (BEGIN IMMEDIATE)
// and a pool of read-only connections, so reads never wait for the writer;
// reads of more than one statement run in one read transaction (one
// snapshot). synchronous=NORMAL is enough here: the projection is derived
// from the history and its cursor is committed with its rows, so a commit
// lost in a power cut is folded again from the log on restart.
package sqlitecontracts

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/internal/cvsql"
	"github.com/marlowe-follower/follower/storage"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// FileName is the database file Open creates in the data directory.
const FileName = "contracts.sqlite"

// File is the contract projection's SQLite file: synchronous=NORMAL, since
// the projection is derived from the history and a commit lost in a power
// cut is folded again from the log.
var File = storage.FileSpec{Name: FileName, Synchronous: "NORMAL"}

// Line is the contract projection's migration line on SQLite (its versions
// in cv_schema_migrations of contracts.sqlite).
func Line() (storage.Line, error) {
	return storage.NewLine("contracts", cvsql.MigrationsTable, migrationFS, "migrations", File)
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
	// (DefaultBusyTimeout when 0).
	BusyTimeout time.Duration
}

// Store is the SQLite contract store, safe for concurrent use.
type Store struct {
	cvsql.Reader
	path   string
	write  *sql.DB
	read   *sql.DB
	line   storage.Line
	closed atomic.Bool
}

var _ contractstore.Backend = (*Store)(nil)

// Open opens (creating them if needed) the data directory and its
// contracts.sqlite. It does not touch the schema: call Init next.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	line, err := Line()
	if err != nil {
		return nil, fmt.Errorf("sqlitecontracts: %w", err)
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = DefaultReadConns
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("sqlitecontracts: data directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlitecontracts: data directory %q: the path must not contain ? or #", dir)
	}
	busy := "_pragma=busy_timeout(" + strconv.FormatInt(opts.BusyTimeout.Milliseconds(), 10) + ")"
	write, err := sql.Open("sqlite", path+"?_txlock=immediate&"+busy+"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("sqlitecontracts: open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	// The writer connects first: it turns WAL on before any reader opens.
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlitecontracts: open %s: %w", path, err)
	}
	read, err := sql.Open("sqlite", path+"?"+busy+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlitecontracts: open %s: %w", path, err)
	}
	read.SetMaxOpenConns(opts.ReadConns)
	read.SetMaxIdleConns(opts.ReadConns)
	read.SetConnMaxLifetime(0)
	read.SetConnMaxIdleTime(0)
	if err := read.PingContext(ctx); err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("sqlitecontracts: open %s: %w", path, err)
	}
	s := &Store{path: path, write: write, read: read, line: line}
	s.Reader = cvsql.Reader{One: s.one, Tx: s.readTx}
	return s, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes the connections.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	return errors.Join(s.read.Close(), s.write.Close())
}

func (s *Store) check() error {
	if s.closed.Load() {
		return fmt.Errorf("sqlitecontracts: %w", contractstore.ErrClosed)
	}
	return nil
}

// translate wraps a driver error with the operation; not-found and
// conflict errors keep their sentinels.
func (s *Store) translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, contractstore.ErrNotFound) || errors.Is(err, contractstore.ErrConflict) ||
		errors.Is(err, contractstore.ErrSchemaTooNew) {
		return fmt.Errorf("sqlitecontracts: %s: %w", op, err)
	}
	if s.closed.Load() {
		return fmt.Errorf("sqlitecontracts: %s: %w: %w", op, contractstore.ErrClosed, err)
	}
	return fmt.Errorf("sqlitecontracts: %s: %w", op, err)
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.translate("ping", s.read.PingContext(ctx))
}

// inTx runs fn in a write transaction and commits it, or rolls it back.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			return errors.Join(err, rerr)
		}
		return err
	}
	return tx.Commit()
}

// SchemaVersion returns the stored schema version (0 for none) and the
// newest this binary knows.
func (s *Store) SchemaVersion(ctx context.Context) (stored, latest int, err error) {
	if err := s.check(); err != nil {
		return 0, 0, err
	}
	st, err := storage.Versions(ctx, storage.DialectSQLite, s.read, s.line)
	if err != nil {
		return 0, s.line.Latest(), s.translate("schema version", err)
	}
	return st[0].Stored, st[0].Latest, nil
}

// Init applies the pending migrations of the contract line in one
// transaction (storage.Apply).
func (s *Store) Init(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	_, err := storage.Apply(ctx, storage.DialectSQLite, s.write, "", s.line)
	return s.translate("init", err)
}

// Commit writes one batch in one transaction.
func (s *Store) Commit(ctx context.Context, p *contractstore.CommitParams) error {
	if err := s.check(); err != nil {
		return err
	}
	stmts := cvsql.BuildCommit(p)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, st := range stmts {
			res, err := tx.ExecContext(ctx, st.SQL, st.Args...)
			if err != nil {
				return err
			}
			if st.Want >= 0 {
				n, err := res.RowsAffected()
				if err != nil {
					return err
				}
				if n != st.Want {
					return fmt.Errorf("%w (stored seq is not %d)", contractstore.ErrConflict, p.PrevSeq)
				}
			}
		}
		return nil
	})
	return s.translate("commit", err)
}

// rows adapts *sql.Rows to cvsql.Rows.
type rows struct{ *sql.Rows }

// Close closes the rows, dropping the error (a read's error is in Err).
func (r rows) Close() { _ = r.Rows.Close() }

// querier runs the shared statements on the read pool or a transaction.
type querier struct {
	q interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	}
}

// Query runs a read statement.
func (q querier) Query(ctx context.Context, query string, args ...any) (cvsql.Rows, error) {
	r, err := q.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rows{r}, nil
}

// readTx runs fn in a read transaction on a read connection: one snapshot.
func (s *Store) readTx(ctx context.Context, op string, fn func(cvsql.Querier) error) error {
	if err := s.check(); err != nil {
		return err
	}
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return s.translate(op, err)
	}
	err = fn(querier{tx})
	if rerr := tx.Rollback(); err == nil && rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
		err = rerr
	}
	return s.translate(op, err)
}

// one runs a single-statement read on the read pool.
func (s *Store) one(ctx context.Context, op string, fn func(cvsql.Querier) error) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.translate(op, fn(querier{s.read}))
}
