// Package cvsql is the SQL the two contract store backends share: the
// commit as a list of statements, the reads, row encoding and scanning, and
// the migration loader. Statements are written with ? placeholders; the
// PostgreSQL backend numbers them ($1, $2, ...) before sending. Both
// dialects accept the rest as written (ON CONFLICT upserts, row values).
package cvsql

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/marlowe-follower/follower/contracts/contractstore"
)

// MigrationsTable is the table that records the contract store's applied
// migrations; it is separate from the history's schema_migrations, so the
// two schemas version independently in one database.
const MigrationsTable = "cv_schema_migrations"

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// LoadMigrations reads the migrations in dir of fsys: files named
// NNNN_description.sql, numbered from 1 without gaps.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
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

// Pending returns the migrations after version stored, or an error wrapping
// contractstore.ErrSchemaTooNew when stored is newer than the newest one.
func Pending(ms []Migration, stored int) ([]Migration, error) {
	if stored > len(ms) {
		return nil, fmt.Errorf("%w: schema version %d, this binary knows up to %d",
			contractstore.ErrSchemaTooNew, stored, len(ms))
	}
	return ms[stored:], nil
}

// Dollar numbers the ? placeholders of a statement for PostgreSQL. The
// shared statements hold no ? inside literals.
func Dollar(sql string) string {
	n := strings.Count(sql, "?")
	if n == 0 {
		return sql
	}
	var b strings.Builder
	b.Grow(len(sql) + 3*n)
	i := 0
	for _, r := range sql {
		if r == '?' {
			i++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(i))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
