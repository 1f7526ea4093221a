package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history/record"
)

// Migration is one numbered schema change of a line.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Line is one store's schema: its numbered migrations and the table that
// records which of them a database has applied.
type Line struct {
	// Name names the line in messages: history, contracts, streams.
	Name string
	// Table records the applied versions (version, name, applied_at).
	Table string
	// Migrations are numbered from 1 without gaps.
	Migrations []Migration
	// File is the SQLite file that holds the line's tables (ignored on
	// PostgreSQL, where every line lives in one schema).
	File FileSpec
}

// Latest is the newest version the line knows.
func (l *Line) Latest() int { return len(l.Migrations) }

// NewLine reads the migrations of a line from dir of fsys: files named
// NNNN_description.sql, numbered from 1 without gaps.
func NewLine(name, table string, fsys fs.FS, dir string, file FileSpec) (Line, error) {
	ms, err := Load(fsys, dir)
	if err != nil {
		return Line{}, fmt.Errorf("%s: %w", name, err)
	}
	return Line{Name: name, Table: table, Migrations: ms, File: file}, nil
}

// Load reads the migrations in dir of fsys: files named
// NNNN_description.sql, numbered from 1 without gaps.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: want NNNN_description.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: bad number %q", name, num)
		}
		text, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(text)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: want number %d (numbers start at 1, without gaps)", m.Name, i+1)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("migrations: none in %s", dir)
	}
	return ms, nil
}

// Status is where a database stands on one line.
type Status struct {
	Line string
	// Stored is the newest version applied (0: none, the tables are missing).
	Stored int
	// Latest is the newest version this binary knows.
	Latest int
	// Pending names the migrations still to apply, in order.
	Pending []string
}

// Current tells whether nothing is pending.
func (s *Status) Current() bool { return s.Stored >= s.Latest }

// Result is what Migrate did to one line.
type Result struct {
	Line     string
	From, To int
}

// versionTable is the one design of every line's version table.
func versionTable(d Dialect, table string) string {
	if d == DialectPostgres {
		return `CREATE TABLE IF NOT EXISTS ` + table + ` (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`
	}
	return `CREATE TABLE IF NOT EXISTS ` + table + ` (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))) STRICT`
}

// pending returns the migrations of l after version stored, or an error
// wrapping record.ErrSchemaTooNew when stored is newer than l knows.
func pending(l *Line, stored int) ([]Migration, error) {
	if stored > l.Latest() {
		return nil, fmt.Errorf("%s: %w: schema version %d, this binary knows up to %d",
			l.Name, record.ErrSchemaTooNew, stored, l.Latest())
	}
	return l.Migrations[stored:], nil
}

// lockKey is the PostgreSQL advisory lock that serializes migrations of
// one schema across processes.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("marlowe-follower/storage/" + schema))
	return int64(h.Sum64())
}

// Apply applies, in one transaction on db (a writer handle of dialect d),
// the pending migrations of each line in the order given, recording each
// in its line's version table (created when missing), and returns what it
// did. A line whose stored version is newer than the binary's refuses the
// whole transaction with record.ErrSchemaTooNew: nothing changes then. On
// PostgreSQL, schema (when not empty) is created when missing and
// concurrent migrations of it wait for each other (an advisory lock).
func Apply(ctx context.Context, d Dialect, db *sql.DB, schema string, lines ...Line) ([]Result, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	res, err := applyTx(ctx, d, tx, schema, lines)
	if err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			err = errors.Join(err, rerr)
		}
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return res, nil
}

func applyTx(ctx context.Context, d Dialect, tx *sql.Tx, schema string, lines []Line) ([]Result, error) {
	if d == DialectPostgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey(schema)); err != nil {
			return nil, err
		}
		if schema != "" {
			if _, err := tx.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
				return nil, err
			}
		}
	}
	out := make([]Result, 0, len(lines))
	for i := range lines {
		l := &lines[i]
		if _, err := tx.ExecContext(ctx, versionTable(d, l.Table)); err != nil {
			return nil, fmt.Errorf("%s: %w", l.Name, err)
		}
		if d == DialectSQLite {
			if err := normalizeSQLite(ctx, tx, l.Table); err != nil {
				return nil, fmt.Errorf("%s: %w", l.Name, err)
			}
		}
		var from int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(max(version), 0) FROM `+l.Table).Scan(&from); err != nil {
			return nil, fmt.Errorf("%s: %w", l.Name, err)
		}
		ms, err := pending(l, from)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return nil, fmt.Errorf("%s: migration %s: %w", l.Name, m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, Rebind(d, `INSERT INTO `+l.Table+` (version, name) VALUES (?, ?)`),
				m.Version, m.Name); err != nil {
				return nil, fmt.Errorf("%s: %w", l.Name, err)
			}
		}
		out = append(out, Result{Line: l.Name, From: from, To: from + len(ms)})
	}
	return out, nil
}

// normalizeSQLite rebuilds a version table of an earlier design (the
// stream store's kept applied_at as integer microseconds, without a
// default) into the one design, keeping its rows.
func normalizeSQLite(ctx context.Context, tx *sql.Tx, table string) error {
	var typ string
	err := tx.QueryRowContext(ctx, `SELECT upper(type) FROM pragma_table_info(?) WHERE name = 'applied_at'`, table).Scan(&typ)
	if err != nil || typ == "TEXT" {
		return err
	}
	old := table + "_old"
	for _, q := range []string{
		`ALTER TABLE ` + table + ` RENAME TO ` + old,
		versionTable(DialectSQLite, table),
		`INSERT INTO ` + table + ` (version, name, applied_at) SELECT version, name,
			strftime('%Y-%m-%dT%H:%M:%fZ', applied_at / 1000000.0, 'unixepoch') FROM ` + old,
		`DROP TABLE ` + old,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// Versions reports where db (of dialect d) stands on each line, reading
// only: a line whose version table is missing stands at 0.
func Versions(ctx context.Context, d Dialect, db *sql.DB, lines ...Line) ([]Status, error) {
	out := make([]Status, 0, len(lines))
	for i := range lines {
		l := &lines[i]
		exists := `SELECT to_regclass($1) IS NOT NULL`
		if d == DialectSQLite {
			exists = `SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = ?`
		}
		var ok bool
		if err := db.QueryRowContext(ctx, exists, l.Table).Scan(&ok); err != nil {
			return nil, fmt.Errorf("%s: schema version: %w", l.Name, err)
		}
		stored := 0
		if ok {
			if err := db.QueryRowContext(ctx, `SELECT COALESCE(max(version), 0) FROM `+l.Table).Scan(&stored); err != nil {
				return nil, fmt.Errorf("%s: schema version: %w", l.Name, err)
			}
		}
		out = append(out, NewStatus(l, stored))
	}
	return out, nil
}

// NewStatus is the status of line l at version stored.
func NewStatus(l *Line, stored int) Status {
	st := Status{Line: l.Name, Stored: stored, Latest: l.Latest()}
	for _, m := range l.Migrations[min(stored, l.Latest()):] {
		st.Pending = append(st.Pending, m.Name)
	}
	return st
}

// LineVersion is where db stands on line l (Check of one line): the
// stored version (0: none) and the newest this binary knows.
func LineVersion(ctx context.Context, db DB, l Line) (stored, latest int, err error) {
	st, err := db.Check(ctx, l)
	if err != nil {
		return 0, l.Latest(), err
	}
	return st[0].Stored, st[0].Latest, nil
}

// MigrateLine applies the pending migrations of line l alone (Migrate of
// one line) and returns its versions before and after.
func MigrateLine(ctx context.Context, db DB, l Line) (from, to int, err error) {
	res, err := db.Migrate(ctx, l)
	if err != nil {
		return 0, 0, err
	}
	return res[0].From, res[0].To, nil
}
