package storage

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/marlowe-follower/follower/history/record"
)

// ErrClosed is returned by a storage handle after Close; it is the storage
// layer's closed sentinel, record.ErrBackendClosed.
var ErrClosed = record.ErrBackendClosed

// Errors is the one translation of driver errors into the storage
// sentinels (history/record's), for every store on either database. The
// zero value is not usable: set Prefix.
type Errors struct {
	// Prefix names the store in messages ("pgstore", "contract store").
	Prefix string
	// Duplicate, when set, names the sentinel of a unique violation in a
	// table (nil: no sentinel, the error as it is).
	Duplicate func(table string) error

	closed atomic.Bool
}

// Close marks the store closed: Check refuses calls from now on, and
// errors of calls in flight become record.ErrBackendClosed.
func (e *Errors) Close() bool { return e.closed.CompareAndSwap(false, true) }

// Closed tells whether Close was called.
func (e *Errors) Closed() bool { return e.closed.Load() }

// Check refuses a call on a closed store with record.ErrBackendClosed.
func (e *Errors) Check() error {
	if e.closed.Load() {
		return fmt.Errorf("%s: %w", e.Prefix, record.ErrBackendClosed)
	}
	return nil
}

// Translate wraps err with the store and the operation that failed: a
// missing row becomes record.ErrNotFound; after Close, any failure also
// wraps record.ErrBackendClosed; a unique violation wraps the sentinel
// Duplicate names for its table. Sentinels already in err are kept.
func (e *Errors) Translate(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows), errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s: %s: %w", e.Prefix, op, record.ErrNotFound)
	case e.closed.Load() && !errors.Is(err, record.ErrBackendClosed):
		return fmt.Errorf("%s: %s: %w: %w", e.Prefix, op, record.ErrBackendClosed, err)
	}
	if table, ok := UniqueViolation(err); ok && e.Duplicate != nil {
		if s := e.Duplicate(table); s != nil {
			return fmt.Errorf("%s: %s: %w: %w", e.Prefix, op, s, err)
		}
	}
	return fmt.Errorf("%s: %s: %w", e.Prefix, op, err)
}

// UniqueViolation tells whether err is a unique or primary key violation
// and in which table.
func UniqueViolation(err error) (table string, ok bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.TableName, pgErr.Code == "23505"
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		if c := se.Code(); c != sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY && c != sqlite3.SQLITE_CONSTRAINT_UNIQUE {
			return "", false
		}
		// "... UNIQUE constraint failed: records.seq (1555)": the column
		// named after the last "failed: " is table.column.
		msg := se.Error()
		if i := strings.LastIndex(msg, "failed: "); i >= 0 {
			if t, _, found := strings.Cut(msg[i+len("failed: "):], "."); found {
				return t, true
			}
		}
		return "", true
	}
	return "", false
}
