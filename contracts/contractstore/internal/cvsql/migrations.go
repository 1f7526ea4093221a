// Package cvsql is the SQL the two contract store backends share: the
// commit as a list of statements, the reads, row encoding and scanning. Statements are written with ? placeholders; the
// PostgreSQL backend numbers them ($1, $2, ...) before sending. Both
// dialects accept the rest as written (ON CONFLICT upserts, row values).
package cvsql

import (
	"strconv"
	"strings"
)

// MigrationsTable is the table that records the contract store's applied
// migrations; it is separate from the history's schema_migrations, so the
// two schemas version independently in one database.
const MigrationsTable = "cv_schema_migrations"

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
