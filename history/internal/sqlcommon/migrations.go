package sqlcommon

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/sqlmigrate"
)

// Migration is one numbered schema change.
type Migration = sqlmigrate.Migration

// LoadMigrations reads the migrations in dir of fsys: files named
// NNNN_description.sql, numbered from 1 without gaps, applied in order.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) { return sqlmigrate.Load(fsys, dir) }

// Pending returns the migrations after version stored; an error wrapping
// history.ErrSchemaTooNew when stored is newer than the newest migration.
func Pending(ms []Migration, stored int) ([]Migration, error) {
	return sqlmigrate.Pending(ms, stored, record.ErrSchemaTooNew)
}

// MigrationTx is what Migrate needs of a backend's write transaction.
type MigrationTx interface {
	// Exec runs a statement (or, without arguments, a script of several).
	Exec(ctx context.Context, sql string, args ...any) error
	// QueryInt runs a query that returns one integer.
	QueryInt(ctx context.Context, sql string) (int, error)
}

// Migrate applies, in tx, the migrations after the version stored in the
// schema_migrations table (created if missing), recording each, and
// returns the versions before and after. It refuses a stored version newer
// than the newest migration with history.ErrSchemaTooNew. The backend
// serializes concurrent migrations and commits or rolls back tx.
func Migrate(ctx context.Context, tx MigrationTx, d Dialect, ms []Migration) (from, to int, err error) {
	create := `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`
	insert := `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`
	if d == SQLite {
		create = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))) STRICT`
		insert = `INSERT INTO schema_migrations (version, name) VALUES (?, ?)`
	}
	if err := tx.Exec(ctx, create); err != nil {
		return 0, 0, err
	}
	if from, err = tx.QueryInt(ctx, `SELECT COALESCE(max(version), 0) FROM schema_migrations`); err != nil {
		return 0, 0, err
	}
	pending, err := Pending(ms, from)
	if err != nil {
		return from, from, err
	}
	to = from
	for _, m := range pending {
		if err := tx.Exec(ctx, m.SQL); err != nil {
			return from, from, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if err := tx.Exec(ctx, insert, m.Version, m.Name); err != nil {
			return from, from, err
		}
		to = m.Version
	}
	return from, to, nil
}
