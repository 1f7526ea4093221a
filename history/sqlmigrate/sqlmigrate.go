// Package sqlmigrate reads the numbered, embedded schema migrations of the
// SQL backends (history, contract and stream stores, on PostgreSQL and
// SQLite) and applies them, in one transaction, through a small interface
// each backend implements over its driver. Each store keeps its own
// migrations table, so the three schemas version independently in one
// database.
package sqlmigrate

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
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

// Pending returns the migrations after version stored, or an error
// wrapping tooNew (the store's "schema newer than this binary" error) when
// stored is newer than the newest migration.
func Pending(ms []Migration, stored int, tooNew error) ([]Migration, error) {
	if stored > len(ms) {
		return nil, fmt.Errorf("%w: schema version %d, this binary knows up to %d", tooNew, stored, len(ms))
	}
	return ms[stored:], nil
}

// Dialect is what applying migrations needs from a backend, bound to one
// open transaction.
type Dialect interface {
	// Exec runs a statement without arguments.
	Exec(ctx context.Context, query string) error
	// Version returns the newest version in the migrations table (0 when
	// it is empty).
	Version(ctx context.Context) (int, error)
	// Record adds a version to the migrations table.
	Record(ctx context.Context, m Migration) error
}

// Apply creates the migrations table with createTable when it is missing,
// then runs the migrations after the stored version, recording each. It
// returns the versions before and after, or an error wrapping tooNew when
// the database is newer than ms.
func Apply(ctx context.Context, d Dialect, ms []Migration, createTable string, tooNew error) (from, to int, err error) {
	if err := d.Exec(ctx, createTable); err != nil {
		return 0, 0, err
	}
	if from, err = d.Version(ctx); err != nil {
		return 0, 0, err
	}
	pending, err := Pending(ms, from, tooNew)
	if err != nil {
		return from, from, err
	}
	to = from
	for _, m := range pending {
		if err := d.Exec(ctx, m.SQL); err != nil {
			return from, from, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if err := d.Record(ctx, m); err != nil {
			return from, from, err
		}
		to = m.Version
	}
	return from, to, nil
}
