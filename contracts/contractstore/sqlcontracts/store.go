// Package sqlcontracts is the contract projection's store
// (contractstore.Backend): one implementation over both databases of the
// storage layer. On PostgreSQL its tables are prefixed cv_ and live in the
// history's database and schema, on the process's one pool; on SQLite they
// have their own file, contracts.sqlite, in the data directory beside
// history.sqlite, so the projection's writer never contends with the
// history writer for SQLite's single write lock. Each keeps its versions in
// cv_schema_migrations (storage.Apply). The statements are the shared ones
// of cvsql, written with ? placeholders and numbered for PostgreSQL.
//
// A commit is one transaction (on PostgreSQL its statements go to the
// server in one pipelined batch). Reads of more than one statement run in
// one read transaction (PostgreSQL: read-only REPEATABLE READ; SQLite: a
// read connection's snapshot), so the cursor they report and the rows they
// return come from one snapshot; point reads are one statement that joins
// the cursor row, and on PostgreSQL a contract page too (LATERAL). On
// SQLite the file runs in WAL mode with one writer connection (BEGIN
// IMMEDIATE) and read-only connections, and synchronous=NORMAL: the
// projection is derived from the history and its cursor is committed with
// its rows, so a commit lost in a power cut is folded again from the log.
package sqlcontracts

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/internal/cvsql"
	"github.com/marlowe-follower/follower/history/storage"
)

//go:embed migrations
var migrationFS embed.FS

// FileName is the store's SQLite file in the data directory.
const FileName = "contracts.sqlite"

// File is the store's SQLite file: synchronous=NORMAL (see the package
// comment).
var File = storage.FileSpec{Name: FileName, Synchronous: "NORMAL"}

// Line is the contract projection's migration line on a database of
// dialect d (its versions in cv_schema_migrations).
func Line(d storage.Dialect) (storage.Line, error) {
	dir := "migrations/sqlite"
	if d == storage.DialectPostgres {
		dir = "migrations/postgres"
	}
	return storage.NewLine("contracts", cvsql.MigrationsTable, migrationFS, dir, File)
}

// Store is the contract store, safe for concurrent use.
type Store struct {
	cvsql.Reader
	db   storage.DB
	own  bool // Close closes db
	line storage.Line
	errs storage.Errors
	// PostgreSQL: the process's pool, and its writer epoch (fence).
	pool *pgxpool.Pool
	pg   *storage.Postgres
	// SQLite: contracts.sqlite.
	file *storage.File
}

var _ contractstore.Backend = (*Store)(nil)

// New returns the store on db, the process's database, which it shares
// with the other stores (Close leaves db open). It does not touch the
// schema: call Init next.
func New(ctx context.Context, db storage.DB) (*Store, error) {
	line, err := Line(db.Dialect())
	if err != nil {
		return nil, fmt.Errorf("contract store: %w", err)
	}
	s := &Store{db: db, line: line, errs: storage.Errors{Prefix: "contract store"}}
	switch db := db.(type) {
	case *storage.Postgres:
		s.pool, s.pg = db.Pool, db
		s.Reader = cvsql.Reader{One: s.one, Tx: s.readTx, Lateral: true, Counts: &cvsql.Counts{}}
	case *storage.SQLite:
		if s.file, err = db.File(ctx, File); err != nil {
			return nil, fmt.Errorf("contract store: %w", err)
		}
		s.Reader = cvsql.Reader{One: s.one, Tx: s.readTx, Counts: &cvsql.Counts{}}
	default:
		return nil, fmt.Errorf("contract store: no store on %T", db)
	}
	return s, nil
}

// Open returns the store on a database of its own, which Close closes.
func Open(ctx context.Context, db storage.DB) (*Store, error) {
	s, err := New(ctx, db)
	if err != nil {
		return nil, err
	}
	s.own = true
	return s, nil
}

// Path returns the SQLite file's path ("" on PostgreSQL).
func (s *Store) Path() string {
	if s.file == nil {
		return ""
	}
	return s.file.Path
}

// Close closes the store (and its database when it has one of its own).
// Calls after Close return contractstore.ErrClosed.
func (s *Store) Close() error {
	if !s.errs.Close() || !s.own {
		return nil
	}
	return s.db.Close()
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.errs.Check(); err != nil {
		return err
	}
	if s.pool != nil {
		return s.errs.Translate("ping", s.pool.Ping(ctx))
	}
	return s.errs.Translate("ping", s.file.Read.PingContext(ctx))
}

// SchemaVersion returns the stored schema version (0 for none) and the
// newest this binary knows.
func (s *Store) SchemaVersion(ctx context.Context) (stored, latest int, err error) {
	if err := s.errs.Check(); err != nil {
		return 0, 0, err
	}
	stored, latest, err = storage.LineVersion(ctx, s.db, s.line)
	return stored, latest, s.errs.Translate("schema version", err)
}

// Init applies the pending migrations of the contract line in one
// transaction (storage.Apply; on PostgreSQL, concurrent migrations of one
// schema wait for each other).
func (s *Store) Init(ctx context.Context) error {
	if err := s.errs.Check(); err != nil {
		return err
	}
	_, err := s.db.Migrate(ctx, s.line)
	return s.errs.Translate("init", err)
}

// Commit writes one batch in one transaction. On PostgreSQL it is refused
// with record.ErrFenced once another process took the writer lease, and
// with storage.ErrLeaseLapsed while this one's is not renewed
// (storage.Postgres.CheckEpoch).
func (s *Store) Commit(ctx context.Context, p *contractstore.CommitParams) error {
	if err := s.errs.Check(); err != nil {
		return err
	}
	stmts := cvsql.BuildCommit(p)
	conflict := fmt.Errorf("%w (stored seq is not %d)", contractstore.ErrConflict, p.PrevSeq)
	if s.pool != nil {
		if err := s.pg.LeaseHeld(); err != nil {
			return s.errs.Translate("commit", err)
		}
		return s.errs.Translate("commit", pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := s.pg.CheckEpoch(ctx, tx); err != nil {
				return err // a writer that lost its lease (record.ErrFenced)
			}
			var b pgx.Batch
			for _, st := range stmts {
				b.Queue(storage.Rebind(storage.DialectPostgres, st.SQL), st.Args...)
			}
			br := tx.SendBatch(ctx, &b)
			for _, st := range stmts {
				tag, err := br.Exec()
				if err != nil {
					_ = br.Close()
					return err
				}
				if st.Want >= 0 && tag.RowsAffected() != st.Want {
					_ = br.Close()
					return conflict
				}
			}
			if err := br.Close(); err != nil {
				return err
			}
			return s.pg.LeaseHeld() // a lease that lapsed meanwhile commits nothing
		}))
	}
	tx, err := s.file.Write.BeginTx(ctx, nil)
	if err != nil {
		return s.errs.Translate("commit", err)
	}
	for _, st := range stmts {
		res, err := tx.ExecContext(ctx, st.SQL, st.Args...)
		if err == nil && st.Want >= 0 {
			var n int64
			if n, err = res.RowsAffected(); err == nil && n != st.Want {
				err = conflict
			}
		}
		if err != nil {
			return s.errs.Translate("commit", errors.Join(err, ignoreDone(tx.Rollback())))
		}
	}
	return s.errs.Translate("commit", tx.Commit())
}

// ignoreDone drops the error of rolling back a transaction that is over.
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// readTx runs fn in one read transaction: one snapshot.
func (s *Store) readTx(ctx context.Context, op string, fn func(cvsql.Querier) error) error {
	if err := s.errs.Check(); err != nil {
		return err
	}
	if s.pool != nil {
		return s.errs.Translate(op, pgx.BeginTxFunc(ctx, s.pool,
			pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
			func(tx pgx.Tx) error { return fn(pgQuerier{tx}) }))
	}
	tx, err := s.file.Read.BeginTx(ctx, nil)
	if err != nil {
		return s.errs.Translate(op, err)
	}
	err = fn(sqlQuerier{tx})
	if rerr := ignoreDone(tx.Rollback()); err == nil {
		err = rerr
	}
	return s.errs.Translate(op, err)
}

// one runs a single-statement read on the pool or the read connections.
func (s *Store) one(ctx context.Context, op string, fn func(cvsql.Querier) error) error {
	if err := s.errs.Check(); err != nil {
		return err
	}
	if s.pool != nil {
		return s.errs.Translate(op, fn(pgQuerier{s.pool}))
	}
	return s.errs.Translate(op, fn(sqlQuerier{s.file.Read}))
}

// pgQuerier runs the shared statements on the pool or a transaction,
// their placeholders numbered.
type pgQuerier struct {
	q interface {
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	}
}

func (q pgQuerier) Query(ctx context.Context, query string, args ...any) (cvsql.Rows, error) {
	return q.q.Query(ctx, storage.Rebind(storage.DialectPostgres, query), args...)
}

// sqlQuerier runs the shared statements on SQLite's read connections or a
// read transaction.
type sqlQuerier struct {
	q interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	}
}

func (q sqlQuerier) Query(ctx context.Context, query string, args ...any) (cvsql.Rows, error) {
	r, err := q.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return storage.SQLRows{Rows: r}, nil
}

// OpenSQLite opens the store on contracts.sqlite in the data directory
// dir, as a file set of its own (Close closes it). Call Init next.
func OpenSQLite(ctx context.Context, dir string) (*Store, error) {
	db, err := storage.OpenSQLite(dir, storage.SQLiteOptions{})
	if err != nil {
		return nil, fmt.Errorf("contract store: %w", err)
	}
	s, err := Open(ctx, db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}
