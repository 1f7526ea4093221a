// Package pgstore is the PostgreSQL backend of the history log
// (history.Backend) on pgx, on the process's one pool (storage.Postgres,
// shared with the contract and stream stores). Reads run on the pool under
// PostgreSQL's MVCC: they never wait for the writer, and the writer, which
// reserves a connection of the pool for itself, never waits for a free one
// behind readers. A commit is one transaction: the records go by COPY when
// there are many, everything else in one pipelined batch of set-based
// statements. The schema is the history's migration line, embedded in the
// binary (migrations/NNNN_*.sql) and applied by storage.Apply.
package pgstore

import (
	"context"
	"embed"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/internal/sqlcommon"
	"github.com/marlowe-follower/follower/history/storage"
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
	// ReadConns caps the pool's connections for reads; 0 keeps pgxpool's
	// default (the greater of 4 and the number of CPUs). The writer has a
	// connection of its own besides.
	ReadConns int32
}

// Store is the PostgreSQL history backend. It is safe for concurrent use:
// one writer (Commit) and any number of readers. Reads run on the
// process's pool (storage.Postgres), commits and migrations on a
// connection of it the store reserves.
type Store struct {
	sqlcommon.Reads  // Head, RecordRecent, RecordGet, ContractGet, CheckpointGet
	sqlcommon.Schema // SchemaVersion, Migrate, Init
	pg               *storage.Postgres
	read             *pgxpool.Pool
	write            *storage.Reserved
	own              bool // Close closes pg
	errs             storage.Errors
	// channelName is the commit notices' channel, resolved at first use.
	channelName atomic.Pointer[string]
}

var _ history.Backend = (*Store)(nil)

// Open connects to the database at url (a PostgreSQL URL or key=value
// connection string) on a pool of the store's own and checks that it
// answers. It does not touch the schema: call Init (or Migrate) next.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	pg, err := storage.OpenPostgres(ctx, url, storage.PostgresOptions{
		Schema: opts.Schema, MaxConns: opts.ReadConns, ApplicationName: "marlowe-follower history"})
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s, err := New(pg)
	if err != nil {
		_ = pg.Close()
		return nil, err
	}
	s.own = true
	return s, nil
}

// New returns the store on the process's pool pg, which it shares with the
// other stores (Close leaves pg open). It does not touch the schema.
func New(pg *storage.Postgres) (*Store, error) {
	line, err := Line()
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s := &Store{pg: pg, read: pg.Pool, write: pg.Reserve()}
	s.errs = sqlcommon.NewErrors("pgstore")
	s.Schema = sqlcommon.Schema{DB: s.pg, Line: line, Errs: &s.errs, RecordNetwork: s.recordNetwork}
	s.Reads = sqlcommon.Reads{Dialect: sqlcommon.Postgres, Pool: querier{s.read}, Snapshot: s.snapshot, Errs: &s.errs}
	return s, nil
}

// Close gives back the writer's connection (and closes the pool when the
// store opened it). Calls after Close return history.ErrBackendClosed.
func (s *Store) Close() error {
	if !s.errs.Close() {
		return nil
	}
	s.write.Release()
	if s.own {
		return s.pg.Close()
	}
	return nil
}

// check refuses calls on a closed store.
func (s *Store) check() error { return s.errs.Check() }

// translate turns a driver error into the store's (storage.Errors):
// not-found and duplicate-seq errors become the history sentinels; every
// error is wrapped with the operation that failed.
func (s *Store) translate(op string, err error) error { return s.errs.Translate(op, err) }

// recordNetwork stores the network magic unless one is stored, and
// returns the one stored (sqlcommon.Schema.Init).
func (s *Store) recordNetwork(ctx context.Context, magic int64) (stored int64, err error) {
	err = s.write.BeginFunc(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO meta (id, network_magic) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, magic); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT network_magic FROM meta WHERE id = 1`).Scan(&stored)
	})
	return stored, err
}
