package sqlitestore

import (
	"context"
	"database/sql"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/internal/sqlcommon"
	"github.com/marlowe-follower/follower/history/record"
)

// The statements of a commit, prepared once per store (see Store.prepare).
const (
	qHead           = `SELECT (SELECT COALESCE(max(seq), 0) FROM records), slot, block_no, hash FROM horizon WHERE id = 1`
	qContractExists = `SELECT count(*) FROM contracts WHERE contract_id = ?`
	qInsertRecord   = `INSERT INTO records (seq, kind, slot, block_no, block_hash, tx_id, tx_index, contract_id, payload)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qUpsertContract = `INSERT INTO contracts (` + sqlcommon.ContractColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (contract_id) DO UPDATE SET created_seq = excluded.created_seq,
		slot = excluded.slot, block_no = excluded.block_no, block_hash = excluded.block_hash`
	qInsertTag   = `INSERT INTO contract_tags (contract_id, tag) VALUES (?, ?) ON CONFLICT DO NOTHING`
	qInsertParty = `INSERT INTO contract_parties (` + sqlcommon.PartyColumns + `) VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT DO NOTHING`
	qDeleteBreadcrumbs = `DELETE FROM breadcrumbs`
	qInsertBreadcrumb  = `INSERT INTO breadcrumbs (position, slot, block_no, hash) VALUES (?, ?, ?, ?)`
	qFirstPoint        = `UPDATE meta SET first_slot = ?, first_block_no = ?, first_hash = ? WHERE id = 1 AND first_slot IS NULL`
	qTip               = `UPDATE tip SET slot = ?, block_no = ?, hash = ? WHERE id = 1`
	qDeleteChange      = `DELETE FROM utxo_changes WHERE slot = ?`
	qInsertChange      = `INSERT INTO utxo_changes (` + sqlcommon.ChangeColumns + `) VALUES (?, ?, ?, ?, ?)`
	qDeleteUTxO        = `DELETE FROM utxos WHERE ref = ?`
	qInsertUTxO        = `INSERT INTO utxos (` + sqlcommon.UTxOColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (ref) DO NOTHING`
	qHorizon = `UPDATE horizon SET slot = ?, block_no = ?, hash = ? WHERE id = 1`
	qPrune   = `DELETE FROM utxo_changes WHERE block_no <= ?`
)

// qMark is the set-based rollback mark.
var qMark = sqlcommon.MarkStatement(sqlcommon.SQLite)

// commitStatements lists the statements Store.prepare prepares.
var commitStatements = []string{
	qHead, qContractExists, qInsertRecord, qUpsertContract, qInsertTag, qInsertParty, qDeleteBreadcrumbs, qInsertBreadcrumb, qFirstPoint, qTip, qDeleteChange, qInsertChange, qDeleteUTxO, qInsertUTxO, qHorizon, qPrune, qMark,
}

// Commit writes one batch in one transaction (see history.Backend) on the
// writer connection. Each kind of row is written by one statement,
// prepared once per store and executed per row; the rollback path is
// set-based.
func (s *Store) Commit(ctx context.Context, p *history.CommitParams) error {
	pl, err := sqlcommon.PlanCommit(sqlcommon.SQLite, &s.errs, p)
	if err != nil {
		return err
	}
	if err := s.prepare(ctx); err != nil {
		return s.translate("commit", err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error { return (&writeTx{ctx: ctx, tx: tx, s: s}).commit(pl) })
	return s.translate("commit", err)
}

// writeTx is a write transaction with the store's prepared statements.
type writeTx struct {
	ctx context.Context
	tx  *sql.Tx
	s   *Store
}

// prepare prepares the commit's statements on the writer connection, once
// per store. It runs before the transaction starts: the writer pool's one
// connection is the transaction's afterwards.
func (s *Store) prepare(ctx context.Context) error {
	s.stmtsMu.Lock()
	defer s.stmtsMu.Unlock()
	if s.stmts == nil {
		return record.ErrBackendClosed
	}
	for _, q := range commitStatements {
		if _, ok := s.stmts[q]; ok {
			continue
		}
		st, err := s.write.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		s.stmts[q] = st
	}
	return nil
}

// stmt returns the transaction's instance of a prepared statement.
func (w *writeTx) stmt(query string) (*sql.Stmt, error) {
	w.s.stmtsMu.Lock()
	st, ok := w.s.stmts[query]
	w.s.stmtsMu.Unlock()
	if !ok {
		return w.tx.PrepareContext(w.ctx, query)
	}
	return w.tx.StmtContext(w.ctx, st), nil
}

// exec runs a statement once.
func (w *writeTx) exec(query string, args ...any) error {
	st, err := w.stmt(query)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(w.ctx, args...)
	return err
}

// each runs a statement with the arguments of each of n rows.
func (w *writeTx) each(query string, n int, args func(i int) []any) error {
	if n == 0 {
		return nil
	}
	st, err := w.stmt(query)
	if err != nil {
		return err
	}
	for i := range n {
		if _, err := st.ExecContext(w.ctx, args(i)...); err != nil {
			return err
		}
	}
	return nil
}

func (w *writeTx) commit(pl *sqlcommon.Plan) error {
	var head int64
	var horizon sqlcommon.HeaderRow
	st, err := w.stmt(qHead)
	if err != nil {
		return err
	}
	if err := st.QueryRowContext(w.ctx).Scan(&head, &horizon.Slot, &horizon.BlockNo, &horizon.Hash); err != nil {
		return err
	}
	if err := pl.CheckHead(head); err != nil {
		return err
	}
	if err := w.resolveAdditions(pl); err != nil {
		return err
	}
	var stored []sqlcommon.ChangeRow
	if floor, ok := pl.RollbackFloor(); ok {
		if stored, err = w.storedChanges(floor); err != nil {
			return err
		}
	}
	up, err := pl.PlanUTxO(stored, horizon)
	if err != nil {
		return err
	}
	for _, step := range []func(*sqlcommon.Plan, *sqlcommon.UTxOPlan) error{
		w.writeRecords, w.writeContracts, w.writeCheckpoint, w.writeUTxO,
	} {
		if err := step(pl, up); err != nil {
			return err
		}
	}
	return nil
}

// resolveAdditions looks up the stored contracts that the batch's party
// additions refer to.
func (w *writeTx) resolveAdditions(pl *sqlcommon.Plan) error {
	ids := pl.AdditionContracts()
	found := make(map[string]bool, len(ids))
	if len(ids) > 0 {
		st, err := w.stmt(qContractExists)
		if err != nil {
			return err
		}
		for _, id := range ids {
			var n int
			if err := st.QueryRowContext(w.ctx, id).Scan(&n); err != nil {
				return err
			}
			found[string(id)] = n > 0
		}
	}
	return pl.ResolveAdditions(found)
}

// storedChanges reads the utxo_changes rows after slot, oldest first.
func (w *writeTx) storedChanges(slot int64) ([]sqlcommon.ChangeRow, error) {
	rows, err := w.tx.QueryContext(w.ctx, `SELECT `+sqlcommon.ChangeColumns+` FROM utxo_changes WHERE slot > ? ORDER BY slot`, slot)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqlcommon.ChangeRow
	for rows.Next() {
		var r sqlcommon.ChangeRow
		if err := rows.Scan(r.Dest()...); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (w *writeTx) writeRecords(pl *sqlcommon.Plan, _ *sqlcommon.UTxOPlan) error {
	rs := pl.Records
	if err := w.each(qInsertRecord, len(rs), func(i int) []any {
		r := &rs[i]
		return []any{r.Seq, r.Kind, r.Slot, r.BlockNo, r.BlockHash, r.TxID, r.TxIndex, r.ContractID, string(r.Payload)}
	}); err != nil {
		return err
	}
	return w.each(qMark, len(pl.Marks), func(i int) []any {
		m := pl.Marks[i]
		return []any{m.MarkerSeq, m.MarkerSeq, m.ToSlot}
	})
}

func (w *writeTx) writeContracts(pl *sqlcommon.Plan, _ *sqlcommon.UTxOPlan) error {
	if err := w.each(qUpsertContract, len(pl.Contracts), func(i int) []any { return pl.Contracts[i].Args() }); err != nil {
		return err
	}
	if err := w.each(qInsertTag, len(pl.Tags), func(i int) []any { return []any{pl.Tags[i].ContractID, pl.Tags[i].Tag} }); err != nil {
		return err
	}
	return w.each(qInsertParty, len(pl.Parties), func(i int) []any { return pl.Parties[i].Args() })
}

func (w *writeTx) writeCheckpoint(pl *sqlcommon.Plan, _ *sqlcommon.UTxOPlan) error {
	if err := w.exec(qDeleteBreadcrumbs); err != nil {
		return err
	}
	if err := w.each(qInsertBreadcrumb, len(pl.Breadcrumbs), func(i int) []any {
		h := pl.Breadcrumbs[i]
		return []any{i, h.Slot, h.BlockNo, h.Hash}
	}); err != nil {
		return err
	}
	if len(pl.Breadcrumbs) > 0 {
		first := pl.Breadcrumbs[0]
		if err := w.exec(qFirstPoint, first.Slot, first.BlockNo, first.Hash); err != nil {
			return err
		}
	}
	return w.exec(qTip, pl.Tip.Slot, pl.Tip.BlockNo, pl.Tip.Hash)
}

func (w *writeTx) writeUTxO(pl *sqlcommon.Plan, up *sqlcommon.UTxOPlan) error {
	if err := w.each(qDeleteChange, len(up.DeleteChanges),
		func(i int) []any { return []any{up.DeleteChanges[i]} }); err != nil {
		return err
	}
	if err := w.each(qInsertChange, len(up.InsertChanges), func(i int) []any {
		c := &up.InsertChanges[i]
		return []any{c.Block.Slot, c.Block.BlockNo, c.Block.Hash, string(c.Added), string(c.Removed)}
	}); err != nil {
		return err
	}
	if err := w.each(qDeleteUTxO, len(up.DeleteRefs),
		func(i int) []any { return []any{up.DeleteRefs[i]} }); err != nil {
		return err
	}
	if err := w.each(qInsertUTxO, len(up.InsertUTxOs), func(i int) []any { return up.InsertUTxOs[i].Args() }); err != nil {
		return err
	}
	if h := pl.Horizon; h != nil {
		if err := w.exec(qHorizon, h.Slot, h.BlockNo, h.Hash); err != nil {
			return err
		}
		return w.exec(qPrune, h.BlockNo)
	}
	return nil
}
