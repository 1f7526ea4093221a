// Package storage is the one storage layer of each database the service
// uses: one PostgreSQL connection pool per process (Postgres), or one set
// of SQLite files in the data directory (SQLite), shared by the history,
// contract and stream stores; one migration runner that applies the three
// stores' migration lines in order (Migrate, Check); and one translation of
// driver errors into the storage sentinels of history/record (Translate).
//
// Each store keeps its schema as a line of numbered migrations, embedded in
// its own package (the way river keeps its drivers' migration lines), and
// records the versions it applied in a table of its own of one design
// (version, name, applied_at): schema_migrations for the history,
// cv_schema_migrations for the contract projection, ws_schema_migrations
// for the durable streams.
package storage

import (
	"context"
	"strconv"
	"strings"
)

// DB is the process's one database: a *Postgres or a *SQLite.
type DB interface {
	// Dialect is the SQL it speaks.
	Dialect() Dialect
	// Migrate applies the pending migrations of each line, in order.
	Migrate(ctx context.Context, lines ...Line) ([]Result, error)
	// Check reports where the database stands on each line, creating
	// nothing.
	Check(ctx context.Context, lines ...Line) ([]Status, error)
	// Close releases the connections (after the stores that use them).
	Close() error
}

var (
	_ DB = (*Postgres)(nil)
	_ DB = (*SQLite)(nil)
)

// Dialect is the SQL a database speaks.
type Dialect uint8

// Dialects.
const (
	// DialectPostgres numbers its parameters ($1, $2, ...).
	DialectPostgres Dialect = iota + 1
	// DialectSQLite (modernc.org/sqlite) takes ? parameters.
	DialectSQLite
)

// String names the dialect.
func (d Dialect) String() string {
	switch d {
	case DialectPostgres:
		return "postgresql"
	case DialectSQLite:
		return "sqlite"
	}
	return "dialect(" + strconv.Itoa(int(d)) + ")"
}

// Rebind spells the ? parameters of a statement as d takes them: numbered
// ($1, $2, ...) for PostgreSQL, unchanged for SQLite. The statement must
// hold no ? inside a literal.
func Rebind(d Dialect, query string) string {
	if d != DialectPostgres {
		return query
	}
	n := strings.Count(query, "?")
	if n == 0 {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 3*n)
	i := 0
	for _, r := range query {
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
