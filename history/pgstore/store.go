// Package pgstore is the PostgreSQL backend of the history log
// (history.Backend) on pgx. Reads run on a pool of connections of their
// own under PostgreSQL's MVCC: they never wait for the writer, and the
// writer, which has its own connection, never waits for a free one behind
// readers. A commit is one transaction: the records go by COPY when there
// are many, everything else in one pipelined batch of set-based statements.
// The schema is created and upgraded by numbered migrations embedded in the
// binary (migrations/NNNN_*.sql).
package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/storage"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Line is the history's migration line on PostgreSQL (its versions in
// schema_migrations).
func Line() (storage.Line, error) {
	return storage.NewLine("history", "schema_migrations", migrationFS, "migrations", storage.FileSpec{})
}

// Options tune Open. The zero value is a good default.
type Options struct {
	// Schema, when set, is the PostgreSQL schema that holds the store's
	// tables: every connection's search_path. Migrate creates it when it is
	// missing. Empty means the server's default search_path (public).
	Schema string
	// ReadConns caps the readers' connection pool; 0 keeps pgxpool's
	// default (the greater of 4 and the number of CPUs). The writer has a
	// connection of its own besides.
	ReadConns int32
}

// Store is the PostgreSQL history backend. It is safe for concurrent use:
// one writer (Commit) and any number of readers.
type Store struct {
	read   *pgxpool.Pool
	write  *pgxpool.Pool // one connection: commits and migrations
	schema string
	line   storage.Line
	closed atomic.Bool
}

var _ history.Backend = (*Store)(nil)

// Open connects to the database at url (a PostgreSQL URL or key=value
// connection string) and checks that it answers. It does not touch the
// schema: call Init (or Migrate) next.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	line, err := Line()
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: database URL: %w", err)
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "marlowe-follower history"
	wcfg := cfg.Copy()
	wcfg.MinConns, wcfg.MaxConns = 0, 1
	if opts.ReadConns > 0 {
		cfg.MaxConns = opts.ReadConns
	}
	read, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	if err := read.Ping(ctx); err != nil {
		read.Close()
		return nil, fmt.Errorf("pgstore: connect to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	write, err := pgxpool.NewWithConfig(ctx, wcfg)
	if err != nil {
		read.Close()
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	return &Store{read: read, write: write, schema: opts.Schema, line: line}, nil
}

// Close releases the connections. Calls after Close return
// history.ErrBackendClosed.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.read.Close()
		s.write.Close()
	}
	return nil
}

// check refuses calls on a closed store.
func (s *Store) check() error {
	if s.closed.Load() {
		return fmt.Errorf("pgstore: %w", record.ErrBackendClosed)
	}
	return nil
}

// translate turns a driver error into the store's: not-found and
// duplicate-seq errors become the history sentinels; every error is wrapped
// with the operation that failed.
func (s *Store) translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("pgstore: %s: %w", op, record.ErrNotFound)
	}
	if s.closed.Load() && !errors.Is(err, record.ErrBackendClosed) {
		return fmt.Errorf("pgstore: %s: %w: %w", op, record.ErrBackendClosed, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.TableName == "records" {
		return fmt.Errorf("pgstore: %s: %w: %w", op, record.ErrSeqMismatch, err)
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

// SchemaVersion returns the version of the stored schema (0 for an empty
// database) and the newest version this binary knows. It changes nothing.
func (s *Store) SchemaVersion(ctx context.Context) (stored, latest int, err error) {
	if err := s.check(); err != nil {
		return 0, 0, err
	}
	db := stdlib.OpenDBFromPool(s.read)
	defer db.Close()
	st, err := storage.Versions(ctx, storage.DialectPostgres, db, s.line)
	if err != nil {
		return 0, s.line.Latest(), s.translate("schema version", err)
	}
	return st[0].Stored, st[0].Latest, nil
}

// Migrate applies the pending migrations of the history's line in one
// transaction (storage.Apply) and returns the schema version before and
// after. It refuses a schema newer than the binary with
// history.ErrSchemaTooNew and changes nothing then. Concurrent migrations
// of one schema wait for each other (an advisory lock).
func (s *Store) Migrate(ctx context.Context) (from, to int, err error) {
	if err := s.check(); err != nil {
		return 0, 0, err
	}
	db := stdlib.OpenDBFromPool(s.write)
	defer db.Close()
	res, err := storage.Apply(ctx, storage.DialectPostgres, db, s.schema, s.line)
	if err != nil {
		return 0, 0, s.translate("migrate", err)
	}
	return res[0].From, res[0].To, nil
}

// Init applies pending migrations, then records the network on first use
// or refuses another one with history.ErrWrongNetwork.
func (s *Store) Init(ctx context.Context, p *history.InitParams) error {
	if _, _, err := s.Migrate(ctx); err != nil {
		return err
	}
	var stored int64
	err := pgx.BeginFunc(ctx, s.write, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO meta (id, network_magic) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`,
			int64(p.NetworkMagic)); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT network_magic FROM meta WHERE id = 1`).Scan(&stored)
	})
	if err != nil {
		return s.translate("init", err)
	}
	if stored != int64(p.NetworkMagic) {
		return fmt.Errorf("pgstore: init: %w: the database follows network magic %d, not %d",
			record.ErrWrongNetwork, stored, p.NetworkMagic)
	}
	return nil
}
