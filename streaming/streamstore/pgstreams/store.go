// Package pgstreams keeps the streaming API's durable streams in PostgreSQL,
// in the history's database: tables prefixed ws_ (ws_streams and
// ws_schema_migrations), created and upgraded by numbered migrations
// embedded in the binary. It has its own small connection pool.
package pgstreams

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/marlowe-follower/follower/storage"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Line is the durable streams' migration line on PostgreSQL (its versions
// in ws_schema_migrations).
func Line() (storage.Line, error) {
	return storage.NewLine("streams", "ws_schema_migrations", migrationFS, "migrations", storage.FileSpec{})
}

// DefaultMaxConns is the pool size when Options.MaxConns is 0.
const DefaultMaxConns = 4

// Options tune Open. The zero value is a good default.
type Options struct {
	// Schema, when set, holds the tables (every connection's search_path);
	// it is created when missing. Use the history store's schema.
	Schema string
	// MaxConns caps the pool (DefaultMaxConns when 0).
	MaxConns int32
}

// Store is the PostgreSQL stream store.
type Store struct {
	pool   *pgxpool.Pool
	schema string
	closed atomic.Bool
}

var _ streamstore.Store = (*Store)(nil)

// Open connects to the database at url and applies pending migrations.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	line, err := Line()
	if err != nil {
		return nil, fmt.Errorf("pgstreams: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstreams: database URL: %w", err)
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	cfg.MaxConns = DefaultMaxConns
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "marlowe-follower streams"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstreams: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstreams: connect to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	s := &Store{pool: pool, schema: opts.Schema}
	if err := s.migrate(ctx, line); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// migrate applies the pending migrations of the streams' line
// (storage.Apply).
func (s *Store) migrate(ctx context.Context, line storage.Line) error {
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	_, err := storage.Apply(ctx, storage.DialectPostgres, db, s.schema, line)
	return s.translate("migrate", err)
}

// Close releases the pool. Calls after Close return streamstore.ErrClosed.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.pool.Close()
	}
	return nil
}

func (s *Store) check() error {
	if s.closed.Load() {
		return fmt.Errorf("pgstreams: %w", streamstore.ErrClosed)
	}
	return nil
}

// translate wraps driver errors with the operation; a missing row becomes
// streamstore.ErrNotFound and a duplicate name streamstore.ErrExists.
func (s *Store) translate(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgstreams: %s: %w", op, streamstore.ErrNotFound)
	case errors.Is(err, streamstore.ErrNotFound), errors.Is(err, streamstore.ErrStale),
		errors.Is(err, streamstore.ErrExists), errors.Is(err, streamstore.ErrSchemaTooNew):
		return fmt.Errorf("pgstreams: %s: %w", op, err)
	case s.closed.Load():
		return fmt.Errorf("pgstreams: %s: %w: %w", op, streamstore.ErrClosed, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("pgstreams: %s: %w", op, streamstore.ErrExists)
	}
	return fmt.Errorf("pgstreams: %s: %w", op, err)
}

// StreamCreate implements streamstore.Store.
func (s *Store) StreamCreate(ctx context.Context, st *streamstore.Stream) error {
	if err := s.check(); err != nil {
		return err
	}
	filter, err := json.Marshal(st.Filter.Canonical())
	if err != nil {
		return fmt.Errorf("pgstreams: create: %w", err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	_, err = s.pool.Exec(ctx, `INSERT INTO ws_streams
		(name, filter, mode, batch_size, batch_timeout_ms, cursor, batch, records, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
		st.Name, string(filter), string(st.Mode), st.BatchSize, st.BatchTimeout.Milliseconds(), st.Cursor,
		st.Batch, st.Records, now)
	if err != nil {
		return s.translate("create "+st.Name, err)
	}
	st.CreatedAt, st.UpdatedAt = now, now
	return nil
}

const columns = `name, filter::text, mode, batch_size, batch_timeout_ms, cursor, batch, records, created_at, updated_at`

func scan(row pgx.Row) (*streamstore.Stream, error) {
	var st streamstore.Stream
	var filter, mode string
	var timeoutMs int64
	if err := row.Scan(&st.Name, &filter, &mode, &st.BatchSize, &timeoutMs, &st.Cursor, &st.Batch, &st.Records,
		&st.CreatedAt, &st.UpdatedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(filter), &st.Filter); err != nil {
		return nil, fmt.Errorf("stream %s: stored filter: %w", st.Name, err)
	}
	st.Mode = protocol.Mode(mode)
	st.BatchTimeout = time.Duration(timeoutMs) * time.Millisecond
	st.CreatedAt, st.UpdatedAt = st.CreatedAt.UTC(), st.UpdatedAt.UTC()
	return &st, nil
}

// StreamGet implements streamstore.Store.
func (s *Store) StreamGet(ctx context.Context, name string) (*streamstore.Stream, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	st, err := scan(s.pool.QueryRow(ctx, `SELECT `+columns+` FROM ws_streams WHERE name = $1`, name))
	return st, s.translate("get "+name, err)
}

// StreamList implements streamstore.Store.
func (s *Store) StreamList(ctx context.Context, p *streamstore.StreamListParams) ([]streamstore.Stream, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	after := ""
	if p != nil {
		after = p.After
	}
	rows, err := s.pool.Query(ctx, `SELECT `+columns+` FROM ws_streams WHERE name COLLATE "C" > $1 ORDER BY name COLLATE "C" LIMIT $2`,
		after, p.EffectiveLimit())
	if err != nil {
		return nil, s.translate("list", err)
	}
	defer rows.Close()
	var out []streamstore.Stream
	for rows.Next() {
		st, err := scan(rows)
		if err != nil {
			return nil, s.translate("list", err)
		}
		out = append(out, *st)
	}
	return out, s.translate("list", rows.Err())
}

// StreamAck implements streamstore.Store.
func (s *Store) StreamAck(ctx context.Context, p *streamstore.StreamAckParams) error {
	if err := s.check(); err != nil {
		return err
	}
	var stored int64
	var updated bool
	err := s.pool.QueryRow(ctx, `WITH cur AS (SELECT batch FROM ws_streams WHERE name = $1),
		upd AS (UPDATE ws_streams SET cursor = $2, batch = $3, records = records + $4, updated_at = now()
			WHERE name = $1 AND batch < $3 RETURNING 1)
		SELECT cur.batch, EXISTS (SELECT 1 FROM upd) FROM cur`, p.Name, p.Cursor, p.Batch, p.Records).Scan(&stored, &updated)
	if err == nil && !updated {
		err = fmt.Errorf("%w: batch %d, stored %d", streamstore.ErrStale, p.Batch, stored)
	}
	return s.translate("ack "+p.Name, err)
}

// StreamDelete implements streamstore.Store.
func (s *Store) StreamDelete(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM ws_streams WHERE name = $1`, name)
	if err == nil && tag.RowsAffected() == 0 {
		err = pgx.ErrNoRows
	}
	return s.translate("delete "+name, err)
}

// HistoryGet implements streamstore.Store.
func (s *Store) HistoryGet(ctx context.Context) (*streamstore.HistoryIdentity, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var h streamstore.HistoryIdentity
	var magic, firstSlot int64
	var first, head []byte
	err := s.pool.QueryRow(ctx, `SELECT network_magic, first_slot, first_hash, head_seq, head_hash, updated_at
		FROM ws_history WHERE id = 1`).Scan(&magic, &firstSlot, &first, &h.HeadSeq, &head, &h.UpdatedAt)
	if err != nil {
		return nil, s.translate("history identity", err)
	}
	if len(first) != len(h.FirstHash) || len(head) != len(h.HeadHash) {
		return nil, fmt.Errorf("pgstreams: history identity: stored hashes of %d and %d bytes", len(first), len(head))
	}
	h.NetworkMagic, h.FirstSlot = uint32(magic), uint64(firstSlot) //nolint:gosec // stored from these types
	copy(h.FirstHash[:], first)
	copy(h.HeadHash[:], head)
	h.UpdatedAt = h.UpdatedAt.UTC()
	return &h, nil
}

// HistorySet implements streamstore.Store.
func (s *Store) HistorySet(ctx context.Context, h *streamstore.HistoryIdentity) error {
	if err := s.check(); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	_, err := s.pool.Exec(ctx, `INSERT INTO ws_history
		(id, network_magic, first_slot, first_hash, head_seq, head_hash, updated_at) VALUES (1, $1, $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO UPDATE SET network_magic = excluded.network_magic, first_slot = excluded.first_slot,
			first_hash = excluded.first_hash, head_seq = excluded.head_seq, head_hash = excluded.head_hash,
			updated_at = excluded.updated_at`,
		int64(h.NetworkMagic), int64(h.FirstSlot), h.FirstHash[:], h.HeadSeq, h.HeadHash[:], now) //nolint:gosec // slots fit in int64
	if err != nil {
		return s.translate("history identity", err)
	}
	h.UpdatedAt = now
	return nil
}
