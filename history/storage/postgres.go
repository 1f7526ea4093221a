package storage

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgresOptions tune OpenPostgres. The zero value is a good default.
type PostgresOptions struct {
	// Schema, when set, is the PostgreSQL schema that holds every store's
	// tables: every connection's search_path. Migrate creates it when it is
	// missing. Empty means the server's default search_path (public).
	Schema string
	// MaxConns caps the pool's connections for reads and the stores'
	// writes; 0 keeps pgxpool's default (the greater of 4 and the number of
	// CPUs). The pool holds one connection more, which the history's writer
	// reserves (Reserve), so that it never waits for one behind readers.
	MaxConns int32
	// ApplicationName is the connections' application_name
	// ("marlowe-follower HOST/PID/RANDOM", ProcessName, when empty).
	ApplicationName string
}

// Postgres is the process's one PostgreSQL connection pool, shared by the
// stores: Pool for pgx's own interface (the history's COPY and pipelined
// batches), SQL for database/sql over the same connections.
type Postgres struct {
	Pool   *pgxpool.Pool
	SQL    *sql.DB
	Schema string
	closed atomic.Bool
	// epoch is the writer epoch this process took with its lease, lease
	// the lease (fence.go, lease.go).
	epoch atomic.Int64
	lease atomic.Pointer[Lease]
}

// OpenPostgres connects to the database at url (a PostgreSQL URL or
// key=value connection string) and checks that it answers. It does not
// touch the schema.
func OpenPostgres(ctx context.Context, url string, opts PostgresOptions) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	name := opts.ApplicationName
	if name == "" {
		name = "marlowe-follower " + ProcessName()
	}
	if len(name) > 63 { // the server's limit (NAMEDATALEN - 1)
		name = name[:63]
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.MaxConns++
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return &Postgres{Pool: pool, SQL: stdlib.OpenDBFromPool(pool), Schema: opts.Schema}, nil
}

// Reserved is a connection of the pool kept for one user, the history's
// writer: its commits never wait for a connection behind readers. It is
// taken from the pool at its first use and again after it broke.
type Reserved struct {
	pool *pgxpool.Pool
	mu   sync.Mutex
	conn *pgxpool.Conn
}

// Reserve returns a reserved connection of the pool (taken at first use).
// Release it before the pool is closed.
func (p *Postgres) Reserve() *Reserved { return &Reserved{pool: p.Pool} }

// BeginFunc runs fn in a transaction on the reserved connection and
// commits it, or rolls it back when fn fails. Calls wait for each other.
func (r *Reserved) BeginFunc(ctx context.Context, fn func(pgx.Tx) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil && r.conn.Conn().IsClosed() {
		r.conn.Release()
		r.conn = nil
	}
	if r.conn == nil {
		c, err := r.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		r.conn = c
	}
	return pgx.BeginFunc(ctx, r.conn, fn)
}

// Release gives the connection back to the pool.
func (r *Reserved) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil {
		r.conn.Release()
		r.conn = nil
	}
}

// Dialect is DialectPostgres.
func (p *Postgres) Dialect() Dialect { return DialectPostgres }

// Close releases the pool.
func (p *Postgres) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := p.SQL.Close()
	p.Pool.Close()
	return err
}

// Closed tells whether Close was called.
func (p *Postgres) Closed() bool { return p.closed.Load() }

// Migrate applies the pending migrations of every line, in the order
// given, in one transaction.
func (p *Postgres) Migrate(ctx context.Context, lines ...Line) ([]Result, error) {
	return Apply(ctx, DialectPostgres, p.SQL, p.Schema, lines...)
}

// Check reports where the database stands on each line, creating nothing.
func (p *Postgres) Check(ctx context.Context, lines ...Line) ([]Status, error) {
	return Versions(ctx, DialectPostgres, p.SQL, lines...)
}
