// Package sqlstreams keeps the streaming API's durable streams
// (streamstore.Store): one implementation, on database/sql, over both
// databases of the storage layer. On PostgreSQL its tables are prefixed
// ws_ (ws_streams, ws_schema_migrations) and live in the history's database
// and schema, on the process's one pool (through pgx's database/sql
// driver); ws_history keeps the identity of the history log the cursors
// point into. On SQLite they have their own file, streams.sqlite, in the data
// directory, apart from history.sqlite so that acknowledgements never
// contend with the history writer: one connection in WAL mode with
// synchronous=FULL, so an acknowledgement is on disk when StreamAck
// returns. Open and New apply the streams' pending migrations
// (storage.Apply).
package sqlstreams

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

//go:embed migrations
var migrationFS embed.FS

// FileName is the store's SQLite file in the data directory.
const FileName = "streams.sqlite"

// File is the store's SQLite file: one connection (the traffic is a write
// per acknowledged batch), synchronous=FULL.
var File = storage.FileSpec{Name: FileName, Synchronous: "FULL", ReadConns: -1}

// Line is the durable streams' migration line on a database of dialect d
// (its versions in ws_schema_migrations).
func Line(d storage.Dialect) (storage.Line, error) {
	dir := "migrations/sqlite"
	if d == storage.DialectPostgres {
		dir = "migrations/postgres"
	}
	return storage.NewLine("streams", "ws_schema_migrations", migrationFS, dir, File)
}

// Store is the stream store, safe for concurrent use.
type Store struct {
	storage storage.DB
	own     bool // Close closes storage
	d       storage.Dialect
	db      *sql.DB
	path    string
	errs    storage.Errors
	// pg is the PostgreSQL pool, whose writer epoch fences acks (nil on SQLite).
	pg *storage.Postgres
	// The statements, spelled for the dialect.
	insert, get, list, ack, batchOf, del, historySet string
	lease, want, release, leaseAck, ackState         string
}

var _ streamstore.Store = (*Store)(nil)

// New returns the store on db, the process's database, which it shares
// with the other stores (Close leaves db open), and applies the streams'
// pending migrations.
func New(ctx context.Context, db storage.DB) (*Store, error) {
	line, err := Line(db.Dialect())
	if err != nil {
		return nil, fmt.Errorf("stream store: %w", err)
	}
	s := &Store{storage: db, d: db.Dialect(), errs: storage.Errors{Prefix: "stream store", Duplicate: func(table string) error {
		if table == "" || table == "ws_streams" {
			return streamstore.ErrExists
		}
		return nil
	}}}
	// PostgreSQL keeps the filter as jsonb, the times as timestamptz and
	// orders names by their bytes as SQLite does.
	filter, order := "filter", "name"
	switch db := db.(type) {
	case *storage.Postgres:
		s.db, s.pg, filter, order = db.SQL, db, "filter::text", `name COLLATE "C"`
	case *storage.SQLite:
		f, err := db.File(ctx, File)
		if err != nil {
			return nil, fmt.Errorf("stream store: %w", err)
		}
		s.db, s.path = f.Write, f.Path
	default:
		return nil, fmt.Errorf("stream store: no store on %T", db)
	}
	columns := `name, owner, ` + filter + `, mode, batch_size, batch_timeout_ms, cursor, batch, records, created_at, updated_at`
	s.insert = s.rebind(`INSERT INTO ws_streams (name, owner, filter, mode, batch_size, batch_timeout_ms, cursor, batch,
		records, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	s.get = s.rebind(`SELECT ` + columns + ` FROM ws_streams WHERE name = ?`)
	s.list = s.rebind(`SELECT ` + columns + ` FROM ws_streams WHERE ` + order + ` > ? AND (? OR owner = ?) ORDER BY ` +
		order + ` LIMIT ?`)
	s.ack = s.rebind(`UPDATE ws_streams SET cursor = ?, batch = ?, records = records + ?, updated_at = ?
		WHERE name = ? AND batch < ?`)
	s.batchOf = s.rebind(`SELECT batch FROM ws_streams WHERE name = ?`)
	// Leases are timed by the database's clock (the processes sharing a
	// stream may run on machines whose clocks differ): clock_timestamp(),
	// or on SQLite the current Unix time in microseconds.
	now, later := `clock_timestamp()`, `clock_timestamp() + ? * interval '1 microsecond'`
	if s.d != storage.DialectPostgres {
		now = `CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)`
		later = `(` + now + ` + ?)`
	}
	// Holder X takes the lease when it holds it already, nobody does, or
	// the holder's lease lapsed; unless X had the last round trip and
	// another process asked for the stream meanwhile (its ask still
	// current): then X yields this one. Taking it clears X's own ask.
	s.lease = s.rebind(`UPDATE ws_streams SET lease_holder = ?, lease_until = ` + later + `,
		lease_wanted = CASE WHEN lease_wanted = ? THEN '' ELSE lease_wanted END
		WHERE name = ? AND (lease_holder = ? OR lease_holder = '' OR lease_until < ` + now + `)
		AND NOT (lease_holder <> ? AND lease_last = ? AND lease_wanted <> '' AND lease_wanted <> ?
			AND lease_wanted_until > ` + now + `)
		RETURNING ` + columns)
	// X asks for a stream another process holds.
	s.want = s.rebind(`UPDATE ws_streams SET lease_wanted = ?, lease_wanted_until = ` + later + `
		WHERE name = ? AND lease_holder <> '' AND lease_holder <> ?`)
	s.release = s.rebind(`UPDATE ws_streams SET lease_holder = '', lease_until = NULL, lease_last = ?
		WHERE name = ? AND lease_holder = ?`)
	s.leaseAck = s.rebind(`UPDATE ws_streams SET cursor = ?, batch = ?, records = records + ?, updated_at = ?,
		lease_holder = '', lease_until = NULL, lease_last = ?
		WHERE name = ? AND batch < ? AND lease_holder = ?`)
	s.ackState = s.rebind(`SELECT batch, lease_holder FROM ws_streams WHERE name = ?`)
	s.del = s.rebind(`DELETE FROM ws_streams WHERE name = ?`)
	s.historySet = s.rebind(`INSERT INTO ws_history
		(id, network_magic, first_slot, first_hash, head_seq, head_hash, updated_at) VALUES (1, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET network_magic = excluded.network_magic, first_slot = excluded.first_slot,
			first_hash = excluded.first_hash, head_seq = excluded.head_seq, head_hash = excluded.head_hash,
			updated_at = excluded.updated_at`)
	if _, err := db.Migrate(ctx, line); err != nil {
		return nil, s.errs.Translate("migrate", err)
	}
	return s, nil
}

// Open returns the store on a database of its own, which Close closes, and
// applies the streams' pending migrations.
func Open(ctx context.Context, db storage.DB) (*Store, error) {
	s, err := New(ctx, db)
	if err != nil {
		return nil, err
	}
	s.own = true
	return s, nil
}

func (s *Store) rebind(q string) string { return storage.Rebind(s.d, q) }

// Path returns the SQLite file's path ("" on PostgreSQL).
func (s *Store) Path() string { return s.path }

// Close closes the store (and its database when it has one of its own).
// Calls after Close return streamstore.ErrClosed.
func (s *Store) Close() error {
	if !s.errs.Close() || !s.own {
		return nil
	}
	return s.storage.Close()
}

// stamp is a time as the dialect stores it: timestamptz, or Unix
// microseconds on SQLite.
func (s *Store) stamp(t time.Time) any {
	if s.d == storage.DialectPostgres {
		return t
	}
	return t.UnixMicro()
}

// stampDest scans a stored time.
type stampDest struct {
	t  time.Time
	us int64
	pg bool
}

func (d *stampDest) dest() any {
	if d.pg {
		return &d.t
	}
	return &d.us
}

func (d *stampDest) time() time.Time {
	if d.pg {
		return d.t.UTC()
	}
	return time.UnixMicro(d.us).UTC()
}

// StreamCreate implements streamstore.Store.
func (s *Store) StreamCreate(ctx context.Context, st *streamstore.Stream) error {
	if err := s.errs.Check(); err != nil {
		return err
	}
	filter, err := json.Marshal(st.Filter.Canonical())
	if err != nil {
		return fmt.Errorf("stream store: create: %w", err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	_, err = s.db.ExecContext(ctx, s.insert, st.Name, st.Owner, string(filter), string(st.Mode), st.BatchSize,
		st.BatchTimeout.Milliseconds(), st.Cursor, st.Batch, st.Records, s.stamp(now), s.stamp(now))
	if err != nil {
		return s.errs.Translate("create "+st.Name, err)
	}
	st.CreatedAt, st.UpdatedAt = now, now
	return nil
}

func (s *Store) scan(row interface{ Scan(...any) error }) (*streamstore.Stream, error) {
	var st streamstore.Stream
	var filter, mode string
	var timeoutMs int64
	pg := s.d == storage.DialectPostgres
	created, updated := stampDest{pg: pg}, stampDest{pg: pg}
	if err := row.Scan(&st.Name, &st.Owner, &filter, &mode, &st.BatchSize, &timeoutMs, &st.Cursor, &st.Batch, &st.Records,
		created.dest(), updated.dest()); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(filter), &st.Filter); err != nil {
		return nil, fmt.Errorf("stream %s: stored filter: %w", st.Name, err)
	}
	st.Mode = protocol.Mode(mode)
	st.BatchTimeout = time.Duration(timeoutMs) * time.Millisecond
	st.CreatedAt, st.UpdatedAt = created.time(), updated.time()
	return &st, nil
}

// StreamGet implements streamstore.Store.
func (s *Store) StreamGet(ctx context.Context, name string) (*streamstore.Stream, error) {
	if err := s.errs.Check(); err != nil {
		return nil, err
	}
	st, err := s.scan(s.db.QueryRowContext(ctx, s.get, name))
	return st, s.errs.Translate("get "+name, err)
}

// StreamList implements streamstore.Store.
func (s *Store) StreamList(ctx context.Context, p *streamstore.StreamListParams) ([]streamstore.Stream, error) {
	if err := s.errs.Check(); err != nil {
		return nil, err
	}
	after, owner, anyOwner := "", "", true
	if p != nil {
		after = p.After
		if p.Owner != nil {
			owner, anyOwner = *p.Owner, false
		}
	}
	rows, err := s.db.QueryContext(ctx, s.list, after, anyOwner, owner, p.EffectiveLimit())
	if err != nil {
		return nil, s.errs.Translate("list", err)
	}
	defer rows.Close()
	var out []streamstore.Stream
	for rows.Next() {
		st, err := s.scan(rows)
		if err != nil {
			return nil, s.errs.Translate("list", err)
		}
		out = append(out, *st)
	}
	return out, s.errs.Translate("list", rows.Err())
}

// StreamAck implements streamstore.Store: in one transaction, the cursor
// moves when the batch is newer than the stored one; else the stored batch
// says whether the ack is stale or the stream gone.
func (s *Store) StreamAck(ctx context.Context, p *streamstore.StreamAckParams) error {
	if err := s.errs.Check(); err != nil {
		return err
	}
	if s.pg != nil {
		if err := s.pg.LeaseHeld(); err != nil {
			return s.errs.Translate("ack "+p.Name, err)
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.errs.Translate("ack "+p.Name, err)
	}
	err = s.ackTx(ctx, tx, p)
	if err == nil && s.pg != nil {
		err = s.pg.LeaseHeld() // a lease that lapsed meanwhile moves no cursor
	}
	if err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			err = errors.Join(err, rerr)
		}
		return s.errs.Translate("ack "+p.Name, err)
	}
	return s.errs.Translate("ack "+p.Name, tx.Commit())
}

func (s *Store) ackTx(ctx context.Context, tx *sql.Tx, p *streamstore.StreamAckParams) error {
	if s.pg != nil {
		// A writer that lost its lease moves no cursor (record.ErrFenced).
		if err := s.pg.CheckEpochSQL(ctx, tx); err != nil {
			return err
		}
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	var res sql.Result
	var err error
	if p.Holder == "" {
		res, err = tx.ExecContext(ctx, s.ack, p.Cursor, p.Batch, p.Records, s.stamp(now), p.Name, p.Batch)
	} else {
		res, err = tx.ExecContext(ctx, s.leaseAck, p.Cursor, p.Batch, p.Records, s.stamp(now), p.Holder, p.Name, p.Batch, p.Holder)
	}
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	var stored int64
	var holder string
	if err := tx.QueryRowContext(ctx, s.ackState, p.Name).Scan(&stored, &holder); err != nil {
		return err
	}
	if p.Holder != "" && holder != p.Holder {
		return fmt.Errorf("%w: batch %d acknowledged under %s's lease, held by %q", streamstore.ErrLeased, p.Batch, p.Holder, holder)
	}
	return fmt.Errorf("%w: batch %d, stored %d", streamstore.ErrStale, p.Batch, stored)
}

// StreamLease implements streamstore.Store: one statement takes or renews
// the lease and reads the stream; when it changes nothing, the holder's ask
// is recorded (the current holder then yields the next round trip) and the
// stream's existence tells ErrLeased from ErrNotFound.
func (s *Store) StreamLease(ctx context.Context, p *streamstore.StreamLeaseParams) (*streamstore.Stream, error) {
	if err := s.errs.Check(); err != nil {
		return nil, err
	}
	if p.Holder == "" {
		return nil, errors.New("stream store: lease: no holder")
	}
	ttl := p.EffectiveTTL().Microseconds()
	st, err := s.scan(s.db.QueryRowContext(ctx, s.lease, p.Holder, ttl, p.Holder, p.Name, p.Holder, p.Holder, p.Holder, p.Holder))
	if err == nil {
		return st, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, s.errs.Translate("lease "+p.Name, err)
	}
	if _, err := s.db.ExecContext(ctx, s.want, p.Holder, ttl, p.Name, p.Holder); err != nil {
		return nil, s.errs.Translate("lease "+p.Name, err)
	}
	var batch int64
	var holder string
	switch err := s.db.QueryRowContext(ctx, s.ackState, p.Name).Scan(&batch, &holder); {
	case err != nil:
		return nil, s.errs.Translate("lease "+p.Name, err)
	case holder == "":
		return nil, fmt.Errorf("%w: %s yields its next round trip to another process that asked for it", streamstore.ErrLeased, p.Holder)
	default:
		return nil, fmt.Errorf("%w: held by %q", streamstore.ErrLeased, holder)
	}
}

// StreamRelease implements streamstore.Store.
func (s *Store) StreamRelease(ctx context.Context, p *streamstore.StreamLeaseParams) error {
	if err := s.errs.Check(); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, s.release, p.Holder, p.Name, p.Holder)
	return s.errs.Translate("release "+p.Name, err)
}

// StreamDelete implements streamstore.Store.
func (s *Store) StreamDelete(ctx context.Context, name string) error {
	if err := s.errs.Check(); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, s.del, name)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = sql.ErrNoRows
		}
	}
	return s.errs.Translate("delete "+name, err)
}

// OpenSQLite opens the store on streams.sqlite in the data directory dir,
// as a file set of its own (Close closes it), and applies the streams'
// pending migrations.
func OpenSQLite(ctx context.Context, dir string) (*Store, error) {
	db, err := storage.OpenSQLite(dir, storage.SQLiteOptions{})
	return openOwn(ctx, db, err)
}

// OpenPostgres opens the store in schema ("" for the server's default) of
// the database at url, on a pool of its own (Close closes it), and applies
// the streams' pending migrations.
func OpenPostgres(ctx context.Context, url, schema string) (*Store, error) {
	db, err := storage.OpenPostgres(ctx, url, storage.PostgresOptions{Schema: schema, ApplicationName: "marlowe-follower streams"})
	return openOwn(ctx, db, err)
}

// openOwn opens the store on db, just opened (with err) for it alone:
// Close closes it, and so does a failure to open the store.
func openOwn[D storage.DB](ctx context.Context, db D, err error) (*Store, error) {
	if err != nil {
		return nil, fmt.Errorf("stream store: %w", err)
	}
	s, err := Open(ctx, db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// HistoryGet implements streamstore.Store.
func (s *Store) HistoryGet(ctx context.Context) (*streamstore.HistoryIdentity, error) {
	if err := s.errs.Check(); err != nil {
		return nil, err
	}
	var h streamstore.HistoryIdentity
	var magic, firstSlot int64
	var first, head []byte
	updated := stampDest{pg: s.d == storage.DialectPostgres}
	err := s.db.QueryRowContext(ctx, `SELECT network_magic, first_slot, first_hash, head_seq, head_hash, updated_at
		FROM ws_history WHERE id = 1`).Scan(&magic, &firstSlot, &first, &h.HeadSeq, &head, updated.dest())
	if err != nil {
		return nil, s.errs.Translate("history identity", err)
	}
	if len(first) != len(h.FirstHash) || len(head) != len(h.HeadHash) {
		return nil, fmt.Errorf("stream store: history identity: stored hashes of %d and %d bytes", len(first), len(head))
	}
	h.NetworkMagic, h.FirstSlot = uint32(magic), uint64(firstSlot) //nolint:gosec // stored from these types
	copy(h.FirstHash[:], first)
	copy(h.HeadHash[:], head)
	h.UpdatedAt = updated.time()
	return &h, nil
}

// HistorySet implements streamstore.Store.
func (s *Store) HistorySet(ctx context.Context, h *streamstore.HistoryIdentity) error {
	if err := s.errs.Check(); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	_, err := s.db.ExecContext(ctx, s.historySet,
		int64(h.NetworkMagic), int64(h.FirstSlot), h.FirstHash[:], h.HeadSeq, h.HeadHash[:], s.stamp(now)) //nolint:gosec // slots fit in int64
	if err != nil {
		return s.errs.Translate("history identity", err)
	}
	h.UpdatedAt = now
	return nil
}
