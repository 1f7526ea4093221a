package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/internal/sqlcommon"
)

// Commit writes one batch in one transaction (see history.Backend). The
// stored head and horizon are read with the horizon row locked, which
// serializes writers; the records go by COPY when there are many, and
// everything else to the server as one pipelined batch of set-based
// statements (arrays unnested server-side). Once the process took the
// writer lease (storage.Lease.Acquire) the commit is refused with
// record.ErrFenced when the stored epoch is another, and with
// storage.ErrLeaseLapsed while the lease is not renewed.
func (s *Store) Commit(ctx context.Context, p *history.CommitParams) error {
	pl, err := sqlcommon.PlanCommit(sqlcommon.Postgres, &s.errs, p)
	if err != nil {
		return err
	}
	channel, err := s.channel(ctx)
	if err != nil {
		return s.translate("commit", err)
	}
	if err := s.pg.LeaseHeld(); err != nil {
		return s.translate("commit", err) // a lapsed lease sends nothing to the server
	}
	err = s.write.BeginFunc(ctx, func(tx pgx.Tx) error {
		// Fenced first: nothing of a writer that lost its lease lands; and
		// last, so that a lease that lapsed meanwhile commits nothing.
		if err := s.pg.CheckEpoch(ctx, tx); err != nil {
			return err
		}
		if err := commit(ctx, tx, pl, p, channel); err != nil {
			return err
		}
		return s.pg.LeaseHeld()
	})
	return s.translate("commit", err)
}

// commit writes the plan, then queues the commit's notice on channel: NOTIFY
// is transactional, so listeners (reader processes) hear of the commit
// only once it is durable, and in commit order.
func commit(ctx context.Context, tx pgx.Tx, pl *sqlcommon.Plan, p *history.CommitParams, channel string) error {
	var head int64
	var horizon sqlcommon.HeaderRow
	if err := tx.QueryRow(ctx, `SELECT (SELECT COALESCE(max(seq), 0) FROM records), slot, block_no, hash
		FROM horizon WHERE id = 1 FOR UPDATE`).Scan(&head, &horizon.Slot, &horizon.BlockNo, &horizon.Hash); err != nil {
		return err
	}
	if err := pl.CheckHead(head); err != nil {
		return err
	}
	if err := resolveAdditions(ctx, tx, pl); err != nil {
		return err
	}
	var stored []sqlcommon.ChangeRow
	if floor, ok := pl.RollbackFloor(); ok {
		var err error
		if stored, err = storedChanges(ctx, tx, floor); err != nil {
			return err
		}
	}
	up, err := pl.PlanUTxO(stored, horizon)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	if len(pl.Records) >= copyMin {
		if err := copyRecords(ctx, tx, pl.Records); err != nil {
			return err
		}
	} else {
		queueRecords(b, pl.Records)
	}
	for _, m := range pl.Marks {
		b.Queue(sqlcommon.MarkStatement(sqlcommon.Postgres), m.MarkerSeq, m.MarkerSeq, m.ToSlot)
	}
	queueContracts(b, pl)
	queueCheckpoint(b, pl)
	queueUTxO(b, up)
	if h := pl.Horizon; h != nil {
		b.Queue(`UPDATE horizon SET slot = $1, block_no = $2, hash = $3 WHERE id = 1`, h.Slot, h.BlockNo, h.Hash)
		b.Queue(`DELETE FROM utxo_changes WHERE block_no <= $1`, h.BlockNo)
	}
	n := history.CommitNotice{Seq: head, Tip: p.Checkpoint.Tip}
	if len(p.Records) > 0 {
		n.Seq = p.Records[len(p.Records)-1].Seq
	}
	if len(p.Checkpoint.Breadcrumbs) > 0 {
		n.Block = p.Checkpoint.Breadcrumbs[0]
	}
	b.Queue(`SELECT pg_notify($1, $2)`, channel, history.MarshalNotice(n))
	return tx.SendBatch(ctx, b).Close()
}

// resolveAdditions looks up the stored contracts that the batch's party
// additions refer to.
func resolveAdditions(ctx context.Context, tx pgx.Tx, pl *sqlcommon.Plan) error {
	ids := pl.AdditionContracts()
	found := make(map[string]bool, len(ids))
	if len(ids) > 0 {
		rows, err := tx.Query(ctx, `SELECT contract_id FROM contracts WHERE contract_id = ANY($1)`, ids)
		if err != nil {
			return err
		}
		var id []byte
		_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
			found[string(id)] = true
			return nil
		})
		if err != nil {
			return err
		}
	}
	return pl.ResolveAdditions(found)
}

// storedChanges reads the utxo_changes rows after slot, oldest first.
func storedChanges(ctx context.Context, tx pgx.Tx, slot int64) ([]sqlcommon.ChangeRow, error) {
	rows, err := tx.Query(ctx, `SELECT `+sqlcommon.ChangeColumns+` FROM utxo_changes WHERE slot > $1 ORDER BY slot`, slot)
	if err != nil {
		return nil, err
	}
	var out []sqlcommon.ChangeRow
	var r sqlcommon.ChangeRow
	_, err = pgx.ForEachRow(rows, r.Dest(), func() error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// copyMin is the number of records from which a commit sends them with
// COPY (several times faster than an INSERT from arrays, but a round trip
// of its own).
const copyMin = 64

// recordColumns are the columns a commit writes.
var recordColumns = []string{"seq", "kind", "slot", "block_no", "block_hash", "tx_id", "tx_index", "contract_id", "payload"}

func copyRecords(ctx context.Context, tx pgx.Tx, rs []sqlcommon.RecordRow) error {
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"records"}, recordColumns, pgx.CopyFromSlice(len(rs), func(i int) ([]any, error) {
		r := &rs[i]
		return []any{r.Seq, r.Kind, r.Slot, r.BlockNo, r.BlockHash, r.TxID, r.TxIndex, r.ContractID, r.Payload}, nil
	}))
	return err
}

func queueRecords(b *pgx.Batch, rs []sqlcommon.RecordRow) {
	if len(rs) == 0 {
		return
	}
	n := len(rs)
	seq, slot, blockNo, txIndex := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	kind, payload := make([]string, n), make([]string, n)
	blockHash, txID, contract := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i := range rs {
		r := &rs[i]
		seq[i], kind[i], slot[i], blockNo[i] = r.Seq, r.Kind, r.Slot, r.BlockNo
		blockHash[i], txID[i], txIndex[i], contract[i], payload[i] = r.BlockHash, r.TxID, r.TxIndex, r.ContractID, string(r.Payload)
	}
	// JSON goes as text and is cast row by row: faster than a json[].
	b.Queue(`INSERT INTO records (seq, kind, slot, block_no, block_hash, tx_id, tx_index, contract_id, payload)
		SELECT s, k, sl, bn, bh, t, ti, c, p::json FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[],
			$5::bytea[], $6::bytea[], $7::integer[], $8::bytea[], $9::text[]) AS u(s, k, sl, bn, bh, t, ti, c, p)`,
		seq, kind, slot, blockNo, blockHash, txID, txIndex, contract, payload)
}

func queueContracts(b *pgx.Batch, pl *sqlcommon.Plan) {
	if n := len(pl.Contracts); n > 0 {
		id, cur, hash := make([][]byte, n), make([][]byte, n), make([][]byte, n)
		version := make([]string, n)
		created, slot, blockNo := make([]int64, n), make([]int64, n), make([]int64, n)
		for i, c := range pl.Contracts {
			id[i], version[i], cur[i], created[i] = c.ContractID, c.Version, c.RolesCurrency, c.CreatedSeq
			slot[i], blockNo[i], hash[i] = c.Block.Slot, c.Block.BlockNo, c.Block.Hash
		}
		b.Queue(`INSERT INTO contracts (`+sqlcommon.ContractColumns+`)
			SELECT * FROM unnest($1::bytea[], $2::text[], $3::bytea[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bytea[])
			ON CONFLICT (contract_id) DO UPDATE SET created_seq = excluded.created_seq,
				slot = excluded.slot, block_no = excluded.block_no, block_hash = excluded.block_hash`,
			id, version, cur, created, slot, blockNo, hash)
	}
	if n := len(pl.Tags); n > 0 {
		id, tag := make([][]byte, n), make([]string, n)
		for i, t := range pl.Tags {
			id[i], tag[i] = t.ContractID, t.Tag
		}
		b.Queue(`INSERT INTO contract_tags (contract_id, tag) SELECT * FROM unnest($1::bytea[], $2::text[])
			ON CONFLICT DO NOTHING`, id, tag)
	}
	if n := len(pl.Parties); n > 0 {
		id, key, cur, role := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
		addr, seq := make([]*string, n), make([]int64, n)
		for i, p := range pl.Parties {
			id[i], key[i], addr[i], cur[i], role[i], seq[i] = p.ContractID, p.Key, p.Address, p.RoleCurrency, p.RoleName, p.AddedSeq
		}
		b.Queue(`INSERT INTO contract_parties (`+sqlcommon.PartyColumns+`)
			SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::text[], $4::bytea[], $5::bytea[], $6::bigint[])
			ON CONFLICT DO NOTHING`, id, key, addr, cur, role, seq)
	}
}

func queueCheckpoint(b *pgx.Batch, pl *sqlcommon.Plan) {
	b.Queue(`DELETE FROM breadcrumbs`)
	if n := len(pl.Breadcrumbs); n > 0 {
		pos, slot, blockNo, hash := make([]int64, n), make([]int64, n), make([]int64, n), make([][]byte, n)
		for i, h := range pl.Breadcrumbs {
			pos[i], slot[i], blockNo[i], hash[i] = int64(i), h.Slot, h.BlockNo, h.Hash
		}
		b.Queue(`INSERT INTO breadcrumbs (position, slot, block_no, hash)
			SELECT * FROM unnest($1::integer[], $2::bigint[], $3::bigint[], $4::bytea[])`, pos, slot, blockNo, hash)
		first := pl.Breadcrumbs[0]
		b.Queue(`UPDATE meta SET first_slot = $1, first_block_no = $2, first_hash = $3
			WHERE id = 1 AND first_slot IS NULL`, first.Slot, first.BlockNo, first.Hash)
	}
	b.Queue(`UPDATE tip SET slot = $1, block_no = $2, hash = $3 WHERE id = 1`, pl.Tip.Slot, pl.Tip.BlockNo, pl.Tip.Hash)
}

func queueUTxO(b *pgx.Batch, up *sqlcommon.UTxOPlan) {
	if len(up.DeleteChanges) > 0 {
		b.Queue(`DELETE FROM utxo_changes WHERE slot = ANY($1)`, up.DeleteChanges)
	}
	if n := len(up.InsertChanges); n > 0 {
		slot, blockNo, hash := make([]int64, n), make([]int64, n), make([][]byte, n)
		added, removed := make([]string, n), make([]string, n)
		for i, c := range up.InsertChanges {
			slot[i], blockNo[i], hash[i], added[i], removed[i] = c.Block.Slot, c.Block.BlockNo, c.Block.Hash, string(c.Added), string(c.Removed)
		}
		b.Queue(`INSERT INTO utxo_changes (`+sqlcommon.ChangeColumns+`)
			SELECT s, n, h, a::json, r::json FROM unnest($1::bigint[], $2::bigint[], $3::bytea[], $4::text[], $5::text[])
				AS u(s, n, h, a, r)`,
			slot, blockNo, hash, added, removed)
	}
	if len(up.DeleteRefs) > 0 {
		b.Queue(`DELETE FROM utxos WHERE ref = ANY($1)`, up.DeleteRefs)
	}
	if n := len(up.InsertUTxOs); n > 0 {
		ref, cid, addr, cur, role := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
		datum := make([][]byte, n)
		kind, version := make([]int64, n), make([]string, n)
		for i, u := range up.InsertUTxOs {
			ref[i], kind[i], cid[i], version[i], addr[i], cur[i], role[i] = u.Ref, u.Kind, u.ContractID, u.Version, u.Address, u.RolesCurrency, u.Role
			datum[i] = u.Datum
		}
		b.Queue(`INSERT INTO utxos (`+sqlcommon.UTxOColumns+`)
			SELECT * FROM unnest($1::bytea[], $2::smallint[], $3::bytea[], $4::text[], $5::bytea[], $6::bytea[], $7::bytea[], $8::bytea[])
			ON CONFLICT (ref) DO NOTHING`, ref, kind, cid, version, addr, cur, role, datum)
	}
}
