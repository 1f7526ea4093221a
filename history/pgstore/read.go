package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history/internal/sqlcommon"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage"
)

// readOnly is a consistent snapshot for reads made of several statements.
var readOnly = pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}

// querier runs the reads sqlcommon shares on the read pool or in one of
// its transactions.
type querier struct {
	db interface {
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
}

func (q querier) Row(ctx context.Context, query string, args []any, dest ...any) error {
	return q.db.QueryRow(ctx, query, args...).Scan(dest...)
}

func (q querier) Each(ctx context.Context, query string, args []any, dest []any, fn func() error) error {
	rows, err := q.db.Query(ctx, query, args...)
	return storage.EachRow(rows, err, dest, fn)
}

// snapshot runs fn on one read-only snapshot.
func (s *Store) snapshot(ctx context.Context, fn func(sqlcommon.Querier) error) error {
	return pgx.BeginTxFunc(ctx, s.read, readOnly, func(tx pgx.Tx) error { return fn(querier{tx}) })
}

// RecordList reads a page of records (see history.RecordListParams): one
// statement, keyset-paginated on seq; the planner chooses between reading
// a filter's contracts record by record and scanning the log.
func (s *Store) RecordList(ctx context.Context, p *record.RecordListParams) ([]record.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := sqlcommon.CheckListParams(p); err != nil {
		return nil, s.translate("record list", err)
	}
	out, err := sqlcommon.RecordList(ctx, s.Pool, sqlcommon.Postgres, p, false)
	return out, s.translate("record list", err)
}
