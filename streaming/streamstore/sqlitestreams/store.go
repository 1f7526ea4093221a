// Package sqlitestreams keeps the streaming API's durable streams in an
// embedded SQLite file, streams.sqlite, in the data directory: apart from
// history.sqlite, so that acknowledgements never contend with the history
// writer. The pure-Go modernc.org/sqlite driver runs in WAL mode with
// synchronous=FULL: an acknowledgement is on disk when StreamAck returns.
package sqlitestreams

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/marlowe-follower/follower/storage"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// FileName is the database file Open creates in the data directory.
const FileName = "streams.sqlite"

// File is the durable streams' SQLite file: one connection (the traffic is
// a write per acknowledged batch), synchronous=FULL (an acknowledgement is
// on disk when StreamAck returns).
var File = storage.FileSpec{Name: FileName, Synchronous: "FULL", ReadConns: -1}

// Line is the durable streams' migration line on SQLite (its versions in
// ws_schema_migrations of streams.sqlite).
func Line() (storage.Line, error) {
	return storage.NewLine("streams", "ws_schema_migrations", migrationFS, "migrations", File)
}

// DefaultBusyTimeout is how long a connection waits for another one's lock.
const DefaultBusyTimeout = 10 * time.Second

// Options tune Open. The zero value is a good default.
type Options struct {
	// BusyTimeout is how long to wait for a lock held by another process
	// (DefaultBusyTimeout when 0).
	BusyTimeout time.Duration
}

// Store is the SQLite stream store.
type Store struct {
	path   string
	db     *sql.DB
	closed atomic.Bool
}

var _ streamstore.Store = (*Store)(nil)

// Open opens (creating them if needed) the data directory dir and
// streams.sqlite in it, and applies pending migrations.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	line, err := Line()
	if err != nil {
		return nil, fmt.Errorf("sqlitestreams: %w", err)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("sqlitestreams: data directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlitestreams: data directory %q: the path must not contain ? or #", dir)
	}
	db, err := sql.Open("sqlite", path+"?_txlock=immediate&_pragma=busy_timeout("+
		strconv.FormatInt(opts.BusyTimeout.Milliseconds(), 10)+")&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		return nil, fmt.Errorf("sqlitestreams: open %s: %w", path, err)
	}
	// One connection: the traffic is a write per acknowledged batch.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	s := &Store{path: path, db: db}
	if err := s.migrate(ctx, line); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// migrate applies the pending migrations of the streams' line
// (storage.Apply).
func (s *Store) migrate(ctx context.Context, line storage.Line) error {
	_, err := storage.Apply(ctx, storage.DialectSQLite, s.db, "", line)
	return s.translate("migrate", err)
}

// Close closes the database. Calls after Close return streamstore.ErrClosed.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	return s.db.Close()
}

func (s *Store) check() error {
	if s.closed.Load() {
		return fmt.Errorf("sqlitestreams: %w", streamstore.ErrClosed)
	}
	return nil
}

// translate wraps driver errors with the operation; a missing row becomes
// streamstore.ErrNotFound and a duplicate name streamstore.ErrExists.
func (s *Store) translate(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sqlitestreams: %s: %w", op, streamstore.ErrNotFound)
	case errors.Is(err, streamstore.ErrNotFound), errors.Is(err, streamstore.ErrStale),
		errors.Is(err, streamstore.ErrExists), errors.Is(err, streamstore.ErrSchemaTooNew):
		return fmt.Errorf("sqlitestreams: %s: %w", op, err)
	case s.closed.Load():
		return fmt.Errorf("sqlitestreams: %s: %w: %w", op, streamstore.ErrClosed, err)
	}
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
		return fmt.Errorf("sqlitestreams: %s: %w", op, streamstore.ErrExists)
	}
	return fmt.Errorf("sqlitestreams: %s: %w", op, err)
}

func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
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

// StreamCreate implements streamstore.Store.
func (s *Store) StreamCreate(ctx context.Context, st *streamstore.Stream) error {
	if err := s.check(); err != nil {
		return err
	}
	filter, err := json.Marshal(st.Filter.Canonical())
	if err != nil {
		return fmt.Errorf("sqlitestreams: create: %w", err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	_, err = s.db.ExecContext(ctx, `INSERT INTO ws_streams
		(name, filter, mode, batch_size, batch_timeout_ms, cursor, batch, records, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		st.Name, string(filter), string(st.Mode), st.BatchSize, st.BatchTimeout.Milliseconds(), st.Cursor,
		st.Batch, st.Records, now.UnixMicro(), now.UnixMicro())
	if err != nil {
		return s.translate("create "+st.Name, err)
	}
	st.CreatedAt, st.UpdatedAt = now, now
	return nil
}

const columns = `name, filter, mode, batch_size, batch_timeout_ms, cursor, batch, records, created_at, updated_at`

func scan(row interface{ Scan(...any) error }) (*streamstore.Stream, error) {
	var st streamstore.Stream
	var filter, mode string
	var timeoutMs, created, updated int64
	if err := row.Scan(&st.Name, &filter, &mode, &st.BatchSize, &timeoutMs, &st.Cursor, &st.Batch, &st.Records,
		&created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(filter), &st.Filter); err != nil {
		return nil, fmt.Errorf("stream %s: stored filter: %w", st.Name, err)
	}
	st.Mode = protocol.Mode(mode)
	st.BatchTimeout = time.Duration(timeoutMs) * time.Millisecond
	st.CreatedAt, st.UpdatedAt = time.UnixMicro(created).UTC(), time.UnixMicro(updated).UTC()
	return &st, nil
}

// StreamGet implements streamstore.Store.
func (s *Store) StreamGet(ctx context.Context, name string) (*streamstore.Stream, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	st, err := scan(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM ws_streams WHERE name = ?`, name))
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
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM ws_streams WHERE name > ? ORDER BY name LIMIT ?`,
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
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE ws_streams SET cursor = ?, batch = ?, records = records + ?, updated_at = ?
			WHERE name = ? AND batch < ?`, p.Cursor, p.Batch, p.Records, time.Now().UnixMicro(), p.Name, p.Batch)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var stored int64
		if err := tx.QueryRowContext(ctx, `SELECT batch FROM ws_streams WHERE name = ?`, p.Name).Scan(&stored); err != nil {
			return err
		}
		return fmt.Errorf("%w: batch %d, stored %d", streamstore.ErrStale, p.Batch, stored)
	})
	return s.translate("ack "+p.Name, err)
}

// StreamDelete implements streamstore.Store.
func (s *Store) StreamDelete(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM ws_streams WHERE name = ?`, name)
	if err != nil {
		return s.translate("delete "+name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err == nil {
			err = sql.ErrNoRows
		}
		return s.translate("delete "+name, err)
	}
	return nil
}

// HistoryGet implements streamstore.Store.
func (s *Store) HistoryGet(ctx context.Context) (*streamstore.HistoryIdentity, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var h streamstore.HistoryIdentity
	var first, head []byte
	var updated int64
	err := s.db.QueryRowContext(ctx, `SELECT network_magic, first_slot, first_hash, head_seq, head_hash, updated_at
		FROM ws_history WHERE id = 1`).Scan(&h.NetworkMagic, &h.FirstSlot, &first, &h.HeadSeq, &head, &updated)
	if err != nil {
		return nil, s.translate("history identity", err)
	}
	if len(first) != len(h.FirstHash) || len(head) != len(h.HeadHash) {
		return nil, fmt.Errorf("sqlitestreams: history identity: stored hashes of %d and %d bytes", len(first), len(head))
	}
	copy(h.FirstHash[:], first)
	copy(h.HeadHash[:], head)
	h.UpdatedAt = time.UnixMicro(updated).UTC()
	return &h, nil
}

// HistorySet implements streamstore.Store.
func (s *Store) HistorySet(ctx context.Context, h *streamstore.HistoryIdentity) error {
	if err := s.check(); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	_, err := s.db.ExecContext(ctx, `INSERT INTO ws_history
		(id, network_magic, first_slot, first_hash, head_seq, head_hash, updated_at) VALUES (1, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET network_magic = excluded.network_magic, first_slot = excluded.first_slot,
			first_hash = excluded.first_hash, head_seq = excluded.head_seq, head_hash = excluded.head_hash,
			updated_at = excluded.updated_at`,
		int64(h.NetworkMagic), int64(h.FirstSlot), h.FirstHash[:], h.HeadSeq, h.HeadHash[:], now.UnixMicro()) //nolint:gosec // slots fit in int64
	if err != nil {
		return s.translate("history identity", err)
	}
	h.UpdatedAt = now
	return nil
}
