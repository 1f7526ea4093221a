package sqlitestore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/marlowe-follower/follower/history/internal/sqlcommon"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage"
)

// querier runs the reads sqlcommon shares on the read-only connections or
// in one of their transactions.
type querier struct {
	db interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
}

func (q querier) Row(ctx context.Context, query string, args []any, dest ...any) error {
	return q.db.QueryRowContext(ctx, query, args...).Scan(dest...)
}

func (q querier) Each(ctx context.Context, query string, args []any, dest []any, fn func() error) error {
	rows, err := q.db.QueryContext(ctx, query, args...)
	return storage.EachRow(storage.SQLRows{Rows: rows}, err, dest, fn)
}

// snapshot runs fn in a read transaction on a read-only connection: one
// snapshot for reads made of several statements.
func (s *Store) snapshot(ctx context.Context, fn func(sqlcommon.Querier) error) error {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	if err := fn(querier{tx}); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return tx.Commit()
}

// RecordList reads a page of records (see history.RecordListParams): one
// statement, keyset-paginated on seq. For a filter on contracts it first
// counts the matching contracts: few are read contract by contract, many
// by scanning the log (SQLite has no statistics to choose with).
func (s *Store) RecordList(ctx context.Context, p *record.RecordListParams) ([]record.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := sqlcommon.CheckListParams(p); err != nil {
		return nil, s.translate("record list", err)
	}
	scan := false
	if q, args, ok := sqlcommon.ContractCountQuery(sqlcommon.SQLite, &p.Filter); ok {
		var n int
		if err := s.read.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			return nil, s.translate("record list", err)
		}
		scan = n > sqlcommon.ManyContracts
	}
	out, err := sqlcommon.RecordList(ctx, s.Pool, sqlcommon.SQLite, p, scan)
	return out, s.translate("record list", err)
}
