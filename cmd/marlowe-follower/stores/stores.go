// Package stores opens the process's stores on its one database, once:
// the history backend, the contract projection's store and the durable
// streams' store share one PostgreSQL pool or one set of SQLite files
// (storage.DB), and Open applies every store's pending migrations in one
// place before any of them is used.
package stores

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/sqlcontracts"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/sqlitestore"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
)

// Stores are the stores on one database. Streams is nil on a replica
// (durable streams' cursors are written, so on the primary).
type Stores struct {
	DB        storage.DB
	History   history.Backend
	Contracts contractstore.Backend
	Streams   streamstore.Store
	// Where names the database in messages.
	Where string
}

// OpenDB opens the configured database and says where it is. It creates
// nothing: SQLite files are opened when a store or Migrate needs them.
func OpenDB(ctx context.Context, cfg *config.Config) (storage.DB, string, error) {
	if cfg.Store.DatabaseURL != "" {
		pg, err := storage.OpenPostgres(ctx, cfg.Store.DatabaseURL, storage.PostgresOptions{})
		if err != nil {
			return nil, "", fmt.Errorf("store.databaseURL: %w", err)
		}
		return pg, "postgresql", nil
	}
	dir := filepath.Clean(cfg.Store.DataDir)
	lite, err := storage.OpenSQLite(dir, storage.SQLiteOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("store.dataDir: %w", err)
	}
	return lite, "sqlite " + dir, nil
}

// MigrationLines returns the migration lines of the three stores in the
// order they are applied: history, contracts, streams.
func MigrationLines(d storage.Dialect) ([]storage.Line, error) {
	hist := sqlitestore.Line
	if d == storage.DialectPostgres {
		hist = pgstore.Line
	}
	makers := []func() (storage.Line, error){
		hist,
		func() (storage.Line, error) { return sqlcontracts.Line(d) },
		func() (storage.Line, error) { return sqlstreams.Line(d) },
	}
	lines := make([]storage.Line, 0, len(makers))
	for _, mk := range makers {
		l, err := mk()
		if err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// Open opens the configured database, applies every store's pending
// migrations in order (history, contracts, streams: the only place the
// service migrates), checks that the history follows the configured
// network (recording it on first use) and opens the three stores on it.
// Close them with Close.
func Open(ctx context.Context, cfg *config.Config) (*Stores, error) {
	db, where, err := OpenDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st := &Stores{DB: db, Where: where}
	lines, err := MigrationLines(db.Dialect())
	if err == nil {
		if _, err = db.Migrate(ctx, lines...); err != nil {
			err = fmt.Errorf("%s: %w", where, err)
		}
	}
	if err == nil {
		err = st.open(ctx, cfg.Node.NetworkMagic)
	}
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}

func (st *Stores) open(ctx context.Context, magic uint32) error {
	// Each store goes into its interface field only once it is open: a
	// failed constructor's nil pointer in an interface is not a nil
	// interface, and Close would call it.
	var (
		hist history.Backend
		err  error
	)
	switch db := st.DB.(type) {
	case *storage.Postgres:
		var pg *pgstore.Store
		if pg, err = pgstore.New(db); err == nil {
			hist = pg
		}
	case *storage.SQLite:
		var lite *sqlitestore.Store
		if lite, err = sqlitestore.New(ctx, db); err == nil {
			hist = lite
		}
	}
	if err != nil {
		return err
	}
	st.History = hist
	if err := st.History.Init(ctx, &history.InitParams{NetworkMagic: magic, Migrated: true}); err != nil {
		return err
	}
	contracts, err := sqlcontracts.New(ctx, st.DB)
	if err != nil {
		return err
	}
	st.Contracts = contracts
	streams, err := sqlstreams.New(ctx, st.DB)
	if err != nil {
		return err
	}
	st.Streams = streams
	return nil
}

// OpenReplica opens a reader's read database, a streaming replica of the
// primary: read only, so its schema must be the binary's already (the
// writer migrates the primary, and the replica replays it). It has no
// stream store.
func OpenReplica(ctx context.Context, url string) (*Stores, error) {
	pg, err := storage.OpenPostgres(ctx, url, storage.PostgresOptions{ApplicationName: "marlowe-follower reader"})
	if err != nil {
		return nil, fmt.Errorf("store.readDatabaseURL: %w", err)
	}
	st := &Stores{DB: pg, Where: "the replica"}
	if err := st.openReplica(ctx, pg); err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}

func (st *Stores) openReplica(ctx context.Context, pg *storage.Postgres) error {
	lines, err := MigrationLines(storage.DialectPostgres)
	if err != nil {
		return err
	}
	status, err := pg.Check(ctx, lines...)
	if err != nil {
		return fmt.Errorf("store.readDatabaseURL: %w", err)
	}
	for _, s := range status {
		if s.Stored != s.Latest {
			return fmt.Errorf("store.readDatabaseURL: the %s schema is at version %d, this binary's is %d: "+
				"the replica has not replayed the primary's migrations (or is not a replica of store.databaseURL)", s.Line, s.Stored, s.Latest)
		}
	}
	hist, err := pgstore.New(pg)
	if err != nil {
		return err
	}
	st.History = hist
	contracts, err := sqlcontracts.New(ctx, pg)
	if err != nil {
		return err
	}
	st.Contracts = contracts
	return nil
}

// Postgres is the database's pool on PostgreSQL (nil on SQLite).
func (st *Stores) Postgres() *storage.Postgres {
	pg, _ := st.DB.(*storage.Postgres)
	return pg
}

// CheckStreams refuses, before any stream is served, durable streams whose
// cursors do not point into this history's committed log: another
// history, or an older copy than the streams (restored from an older
// backup).
func (st *Stores) CheckStreams(ctx context.Context, magic uint32) error {
	head, err := st.History.Head(ctx)
	if err != nil {
		return fmt.Errorf("reading the history's head: %w", err)
	}
	return streamstore.CheckHistory(ctx, st.Streams, magic, committedLog{st.History, head})
}

// committedLog is the committed history log as streamstore.CheckHistory
// reads it at start, before the pipeline runs.
type committedLog struct {
	b    history.Backend
	head int64
}

func (l committedLog) Head() int64 { return l.head }

// CurrentHead reads the head again: on PostgreSQL other processes (the
// active writer beside its standby, beside a reader) commit while this one
// starts (streamstore.MovingHistoryLog).
func (l committedLog) CurrentHead(ctx context.Context) (int64, error) { return l.b.Head(ctx) }

func (l committedLog) RecordGet(ctx context.Context, seq int64) (*record.Record, error) {
	return l.b.RecordGet(ctx, seq)
}

// Close closes the stores, then the database.
func (st *Stores) Close() error {
	var errs []error
	for _, c := range []interface{ Close() error }{st.Contracts, st.Streams, st.History} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	errs = append(errs, st.DB.Close())
	return errors.Join(errs...)
}
