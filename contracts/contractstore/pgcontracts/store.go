// Package pgcontracts is the PostgreSQL backend of the contract projection
// (contractstore.Backend) on a pgx connection pool. Its tables are prefixed
// cv_ and live in the same database (and schema) as the history's, with
// their own migration table (cv_schema_migrations), so the two schemas
// version independently. A commit is one transaction whose statements go to
// the server in one pipelined batch; reads that take more than one statement
// run in a read-only REPEATABLE READ transaction, so the cursor they report
// and the rows they return come from one snapshot, and point reads are one
// statement that joins the cursor row.
package pgcontracts

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/internal/cvsql"
	"github.com/marlowe-follower/follower/storage"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Line is the contract projection's migration line on PostgreSQL (its
// versions in cv_schema_migrations).
func Line() (storage.Line, error) {
	return storage.NewLine("contracts", cvsql.MigrationsTable, migrationFS, "migrations", storage.FileSpec{})
}

// Options tune Open. The zero value is a good default.
type Options struct {
	// Schema, when set, is the PostgreSQL schema that holds the tables (the
	// connections' search_path); Init creates it when missing. Use the
	// history's schema to keep both in one place.
	Schema string
	// MaxConns caps the pool; 0 keeps pgxpool's default (the greater of 4
	// and the number of CPUs).
	MaxConns int32
}

// Store is the PostgreSQL contract store, safe for concurrent use.
type Store struct {
	cvsql.Reader
	pool   *pgxpool.Pool
	schema string
	line   storage.Line
	closed atomic.Bool
}

var _ contractstore.Backend = (*Store)(nil)

// Open connects to the database at url and checks that it answers. It does
// not touch the schema: call Init next.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	line, err := Line()
	if err != nil {
		return nil, fmt.Errorf("pgcontracts: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgcontracts: database URL: %w", err)
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "marlowe-follower contracts"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgcontracts: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgcontracts: connect to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	s := &Store{pool: pool, schema: opts.Schema, line: line}
	s.Reader = cvsql.Reader{One: s.one, Tx: s.readTx, Lateral: true}
	return s, nil
}

// Close releases the pool.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.pool.Close()
	}
	return nil
}

func (s *Store) check() error {
	if s.closed.Load() {
		return fmt.Errorf("pgcontracts: %w", contractstore.ErrClosed)
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
		return fmt.Errorf("pgcontracts: %s: %w", op, err)
	}
	if s.closed.Load() {
		return fmt.Errorf("pgcontracts: %s: %w: %w", op, contractstore.ErrClosed, err)
	}
	return fmt.Errorf("pgcontracts: %s: %w", op, err)
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.translate("ping", s.pool.Ping(ctx))
}

// SchemaVersion returns the stored schema version (0 for none) and the
// newest this binary knows.
func (s *Store) SchemaVersion(ctx context.Context) (stored, latest int, err error) {
	if err := s.check(); err != nil {
		return 0, 0, err
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	st, err := storage.Versions(ctx, storage.DialectPostgres, db, s.line)
	if err != nil {
		return 0, s.line.Latest(), s.translate("schema version", err)
	}
	return st[0].Stored, st[0].Latest, nil
}

// Init applies the pending migrations of the contract line in one
// transaction (storage.Apply). Concurrent migrations of one schema wait for
// each other (an advisory lock).
func (s *Store) Init(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	_, err := storage.Apply(ctx, storage.DialectPostgres, db, s.schema, s.line)
	return s.translate("init", err)
}

// Commit writes one batch in one transaction, its statements pipelined.
func (s *Store) Commit(ctx context.Context, p *contractstore.CommitParams) error {
	if err := s.check(); err != nil {
		return err
	}
	stmts := cvsql.BuildCommit(p)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var b pgx.Batch
		for _, st := range stmts {
			b.Queue(cvsql.Dollar(st.SQL), st.Args...)
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
				return fmt.Errorf("%w (stored seq is not %d)", contractstore.ErrConflict, p.PrevSeq)
			}
		}
		return br.Close()
	})
	return s.translate("commit", err)
}

// querier runs the shared statements on a pool or a transaction.
type querier struct {
	q interface {
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	}
}

// Query runs a read statement, its placeholders numbered.
func (q querier) Query(ctx context.Context, sql string, args ...any) (cvsql.Rows, error) {
	return q.q.Query(ctx, cvsql.Dollar(sql), args...)
}

// readTx runs fn in a read-only REPEATABLE READ transaction: one snapshot.
func (s *Store) readTx(ctx context.Context, op string, fn func(cvsql.Querier) error) error {
	if err := s.check(); err != nil {
		return err
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(querier{tx}) })
	return s.translate(op, err)
}

// one runs a single-statement read on the pool.
func (s *Store) one(ctx context.Context, op string, fn func(cvsql.Querier) error) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.translate(op, fn(querier{s.pool}))
}
