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

// Head returns the seq of the newest committed record (0 when empty).
func (s *Store) Head(ctx context.Context) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var head int64
	err := s.read.QueryRow(ctx, `SELECT COALESCE(max(seq), 0) FROM records`).Scan(&head)
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
	query, args := sqlcommon.RecordListQuery(sqlcommon.Postgres, p, false)
	rows, err := s.read.Query(ctx, query, args...)
	if err != nil {
		return nil, s.translate("record list", err)
	}
	out := make([]record.Record, 0, min(sqlcommon.Limit(p.Limit), 1024))
	var row sqlcommon.RecordRow
	_, err = pgx.ForEachRow(rows, row.Dest(), func() error {
		rec, err := row.Record()
		out = append(out, rec)
		return err
	})
	if err != nil {
		return nil, s.translate("record list", err)
	}
	return out, nil
}

// RecordRecent returns the short form of every record of a block after
// afterSlot (markers and rolled-back records too), in seq order.
func (s *Store) RecordRecent(ctx context.Context, afterSlot uint64) ([]record.RecordRef, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	slot, err := sqlcommon.Int64("slot", afterSlot)
	if err != nil {
		return nil, s.translate("record recent", err)
	}
	rows, err := s.read.Query(ctx, `SELECT `+sqlcommon.RecordRefColumns+` FROM records WHERE slot > $1 ORDER BY seq`, slot)
	if err != nil {
		return nil, s.translate("record recent", err)
	}
	var out []record.RecordRef
	var row sqlcommon.RecordRefRow
	_, err = pgx.ForEachRow(rows, row.Dest(), func() error {
		ref, err := row.Ref()
		out = append(out, ref)
		return err
	})
	if err != nil {
		return nil, s.translate("record recent", err)
	}
	return out, nil
}

// RecordGet reads one record; history.ErrNotFound when there is none.
func (s *Store) RecordGet(ctx context.Context, seq int64) (*record.Record, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var row sqlcommon.RecordRow
	err := s.read.QueryRow(ctx, `SELECT `+sqlcommon.RecordColumns+` FROM records WHERE seq = $1`, seq).Scan(row.Dest()...)
	if err != nil {
		return nil, s.translate("record get", err)
	}
	rec, err := row.Record()
	if err != nil {
		return nil, s.translate("record get", err)
	}
	return &rec, nil
}

// ContractGet reads a contract's index entry; history.ErrNotFound when the
// contract was never created. Tags come sorted, parties in the order they
// were added.
func (s *Store) ContractGet(ctx context.Context, id chain.TxOutRef) (*record.ContractIndex, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out *record.ContractIndex
	key := sqlcommon.RefBytes(id)
	err := pgx.BeginTxFunc(ctx, s.read, readOnly, func(tx pgx.Tx) error {
		var row sqlcommon.ContractRow
		if err := tx.QueryRow(ctx, `SELECT `+sqlcommon.ContractColumns+` FROM contracts WHERE contract_id = $1`,
			key).Scan(row.Dest()...); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT tag FROM contract_tags WHERE contract_id = $1 ORDER BY tag`, key)
		if err != nil {
			return err
		}
		var tags []string
		var tag string
		if _, err := pgx.ForEachRow(rows, []any{&tag}, func() error {
			tags = append(tags, tag)
			return nil
		}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT address, role_currency, role_name FROM contract_parties
			WHERE contract_id = $1 ORDER BY added_seq, party_key`, key)
		if err != nil {
			return err
		}
		var parties []record.Party
		var addr *string
		var cur, role []byte
		if _, err := pgx.ForEachRow(rows, []any{&addr, &cur, &role}, func() error {
			parties = append(parties, sqlcommon.PartyFromColumns(addr, cur, role))
			return nil
		}); err != nil {
			return err
		}
		out, err = sqlcommon.ContractFromRow(&row, tags, parties)
		return err
	})
	if err != nil {
		return nil, s.translate("contract get", err)
	}
	return out, nil
}

// CheckpointGet reads what the follower resumes from, as one snapshot.
func (s *Store) CheckpointGet(ctx context.Context) (*history.Checkpoint, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	cp := &history.Checkpoint{}
	err := pgx.BeginTxFunc(ctx, s.read, readOnly, func(tx pgx.Tx) error {
		var tip sqlcommon.TipRow
		var hz sqlcommon.HeaderRow
		if err := tx.QueryRow(ctx, `SELECT (SELECT COALESCE(max(seq), 0) FROM records),
			t.slot, t.block_no, t.hash, h.slot, h.block_no, h.hash FROM tip t, horizon h WHERE t.id = 1 AND h.id = 1`).Scan(
			&cp.Head, &tip.Slot, &tip.BlockNo, &tip.Hash, &hz.Slot, &hz.BlockNo, &hz.Hash); err != nil {
			return err
		}
		var err error
		if cp.Tip, err = tip.Tip(); err != nil {
			return err
		}
		if cp.Horizon, err = hz.Header(); err != nil {
			return err
		}
		var h sqlcommon.HeaderRow
		rows, err := tx.Query(ctx, `SELECT slot, block_no, hash FROM breadcrumbs ORDER BY position`)
		if err != nil {
			return err
		}
		if _, err := pgx.ForEachRow(rows, []any{&h.Slot, &h.BlockNo, &h.Hash}, func() error {
			b, err := h.Header()
			cp.Breadcrumbs = append(cp.Breadcrumbs, b)
			return err
		}); err != nil {
			return err
		}
		var u sqlcommon.UTxORow
		if rows, err = tx.Query(ctx, `SELECT `+sqlcommon.UTxOColumns+` FROM utxos ORDER BY ref`); err != nil {
			return err
		}
		if _, err := pgx.ForEachRow(rows, u.Dest(), func() error {
			t, err := u.UTxO()
			cp.UTxOs = append(cp.UTxOs, t)
			return err
		}); err != nil {
			return err
		}
		var c sqlcommon.ChangeRow
		if rows, err = tx.Query(ctx, `SELECT `+sqlcommon.ChangeColumns+` FROM utxo_changes ORDER BY slot`); err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, c.Dest(), func() error {
			ch, err := c.Changes()
			cp.Recent = append(cp.Recent, ch)
			return err
		})
		return err
	})
	if err != nil {
		return nil, s.translate("checkpoint get", err)
	}
	return cp, nil
}
