package storage

import "database/sql"

// Rows is what a query returns: pgx.Rows, or *sql.Rows through SQLRows.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// SQLRows adapts *sql.Rows to Rows.
type SQLRows struct{ *sql.Rows }

// Close closes the rows, dropping the error (a read's error is in Err).
func (r SQLRows) Close() { _ = r.Rows.Close() }

// EachRow scans every row of rows into dest and calls fn after each; err is
// the query's own (then rows is not read).
func EachRow(rows Rows, err error, dest []any, fn func() error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if err := fn(); err != nil {
			return err
		}
	}
	return rows.Err()
}
