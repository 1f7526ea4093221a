package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/internal/sqlcommon"
	"github.com/marlowe-follower/follower/history/record"
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
	if err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, dest, fn)
	return err
}

// snapshot runs fn on one read-only snapshot.
func (s *Store) snapshot(ctx context.Context, fn func(sqlcommon.Querier) error) error {
	return pgx.BeginTxFunc(ctx, s.read, readOnly, func(tx pgx.Tx) error { return fn(querier{tx}) })
}

// Head returns the seq of the newest committed record (0 when empty).
func (s *Store) Head(ctx context.Context) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	head, err := sqlcommon.Head(ctx, querier{s.read}, sqlcommon.Postgres)
	return head, s.translate("head", err)
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
	out, err := sqlcommon.RecordList(ctx, querier{s.read}, sqlcommon.Postgres, p, false)
	return out, s.translate("record list", err)
}

// RecordRecent returns the short form of every record of a block after
// afterSlot (markers and rolled-back records too), in seq order.
func (s *Store) RecordRecent(ctx context.Context, afterSlot uint64) ([]record.RecordRef, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	out, err := sqlcommon.RecordRecent(ctx, querier{s.read}, sqlcommon.Postgres, afterSlot)
	return out, s.translate("record recent", err)
}

// RecordGet reads one record; history.ErrNotFound when there is none.
func (s *Store) RecordGet(ctx context.Context, seq int64) (*record.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	r, err := sqlcommon.RecordGet(ctx, querier{s.read}, sqlcommon.Postgres, seq)
	return r, s.translate("record get", err)
}

// ContractGet reads a contract's index entry; history.ErrNotFound when the
// contract was never created. Tags come sorted, parties in the order they
// were added.
func (s *Store) ContractGet(ctx context.Context, id chain.TxOutRef) (*record.ContractIndex, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out *record.ContractIndex
	err := s.snapshot(ctx, func(q sqlcommon.Querier) (err error) {
		out, err = sqlcommon.ContractGet(ctx, q, sqlcommon.Postgres, id)
		return err
	})
	return out, s.translate("contract get", err)
}

// CheckpointGet reads what the follower resumes from, as one snapshot.
func (s *Store) CheckpointGet(ctx context.Context) (*history.Checkpoint, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var cp *history.Checkpoint
	err := s.snapshot(ctx, func(q sqlcommon.Querier) (err error) {
		cp, err = sqlcommon.CheckpointGet(ctx, q, sqlcommon.Postgres)
		return err
	})
	return cp, s.translate("checkpoint get", err)
}
