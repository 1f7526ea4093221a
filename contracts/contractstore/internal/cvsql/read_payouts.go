package cvsql

import (
	"context"
	"math"
	"strings"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
)

// PayoutList reads a page of payouts (and, when p asks, counts every
// payout p selects); q must be a read transaction.
func PayoutList(ctx context.Context, q Querier, c *Counts, p *contractstore.PayoutListParams) (*contractstore.PayoutPage, error) {
	at, err := position(ctx, q)
	if err != nil {
		return nil, err
	}
	page := &contractstore.PayoutPage{At: at}
	w := payoutFilterSQL(p)
	if page.Total, err = c.total(ctx, q, at.Seq, p.Count, `SELECT count(*) FROM cv_payouts p`+w.String(), w.args); err != nil {
		return nil, err
	}
	if p.After != nil {
		if p.Descending {
			w.add("(p.seq, p.payout_id) < (?, ?)", p.After.Seq, RefBytes(p.After.ID))
		} else {
			w.add("(p.seq, p.payout_id) > (?, ?)", p.After.Seq, RefBytes(p.After.ID))
		}
	}
	limit := clampLimit(p.Limit)
	var s payoutScan
	order := ` ORDER BY p.seq, p.payout_id LIMIT ?`
	if p.Descending {
		order = ` ORDER BY p.seq DESC, p.payout_id DESC LIMIT ?`
	}
	page.Payouts, page.More, err = collectPage(ctx, q, `SELECT `+payoutCols+` FROM cv_payouts p`+w.String()+order, w.args, limit, s.dest(), s.payout)
	if err != nil {
		return nil, err
	}
	return page, nil
}

// payoutFilterSQL returns the conditions of the payouts p selects.
func payoutFilterSQL(p *contractstore.PayoutListParams) where {
	var w where
	if p.RolesOnly {
		w.add("p.address IS NULL")
	}
	if len(p.Contracts) > 0 {
		w.add("p.contract_id IN ("+marks(len(p.Contracts), 1)+")", refArgs(p.Contracts)...)
	}
	if len(p.Roles) > 0 {
		alts := make([]string, len(p.Roles))
		var args []any
		for i, r := range p.Roles {
			alts[i] = "(p.roles_currency = ? AND p.role = ?)"
			args = append(args, NonNil(r.Currency), NonNil(r.Name))
		}
		w.add("("+strings.Join(alts, " OR ")+")", args...)
	}
	if p.Status != "" {
		w.add("p.status = ?", string(p.Status))
	}
	return w
}

// PayoutGet reads one payout and the cursor in one statement.
func PayoutGet(ctx context.Context, q Querier, id chain.TxOutRef) (*contractstore.Payout, contractstore.Position, error) {
	var s payoutScan
	return withHead(ctx, q, payoutCols+` FROM cv_head k
		LEFT JOIN cv_payouts p ON p.payout_id = ? WHERE k.id = 1`, []any{RefBytes(id)}, s.dest(), s.payout)
}

// withdrawalRow is a cv_withdrawals row as lists read it.
type withdrawalRow struct {
	tx    chain.Hash32
	seq   int64
	block chain.BlockHeader
}

// WithdrawalList reads a page of withdrawals, one per transaction (and,
// when p asks, counts every withdrawal p selects); q must be a read
// transaction.
func WithdrawalList(ctx context.Context, q Querier, c *Counts, p *contractstore.WithdrawalListParams) (*contractstore.WithdrawalPage, error) {
	at, err := position(ctx, q)
	if err != nil {
		return nil, err
	}
	page := &contractstore.WithdrawalPage{At: at}
	w := withdrawalFilterSQL(p)
	cw := where{conds: w.conds[1:], args: w.args[1:]}
	if page.Total, err = c.total(ctx, q, at.Seq, p.Count, `SELECT count(DISTINCT w.tx_id) FROM cv_withdrawals w`+cw.String(), cw.args); err != nil {
		return nil, err
	}
	groups, more, err := withdrawalGroups(ctx, q, w, clampLimit(p.Limit), p.Descending)
	if err != nil {
		return nil, err
	}
	if page.More = more; len(groups) == 0 {
		return page, nil
	}
	txArgs := make([]any, len(groups))
	byTx := make(map[chain.Hash32]int, len(groups))
	for i, g := range groups {
		first, last := g[0], g[len(g)-1]
		if p.Descending {
			first, last = last, first
		}
		txArgs[i] = append([]byte(nil), first.tx[:]...)
		byTx[first.tx] = i
		page.Withdrawals = append(page.Withdrawals, contractstore.Withdrawal{TxID: first.tx, Seq: first.seq,
			LastSeq: last.seq, Block: first.block})
	}
	var pw where
	pw.add("p.withdrawal_tx IN ("+marks(len(txArgs), 1)+")", txArgs...)
	if len(p.Contracts) > 0 {
		pw.add("p.contract_id IN ("+marks(len(p.Contracts), 1)+")", refArgs(p.Contracts)...)
	}
	var s payoutScan
	err = each(ctx, q, `SELECT `+payoutCols+` FROM cv_payouts p`+pw.String()+` ORDER BY p.withdrawal_seq, p.payout_id`,
		pw.args, s.dest(), func() error {
			po, err := s.payout()
			if err == nil {
				i := byTx[po.Withdrawal.TxID]
				page.Withdrawals[i].Payouts = append(page.Withdrawals[i].Payouts, *po)
			}
			return err
		})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// withdrawalFilterSQL returns the conditions of the withdrawals p selects;
// the first is the page's start (withdrawalGroups replaces it).
func withdrawalFilterSQL(p *contractstore.WithdrawalListParams) where {
	var w where
	switch {
	case !p.Descending:
		w.add("w.seq > ?", p.After)
	case p.After > 0:
		w.add("w.seq < ?", p.After)
	default:
		w.add("w.seq < ?", int64(math.MaxInt64))
	}
	if len(p.Contracts) > 0 {
		w.add("w.contract_id IN ("+marks(len(p.Contracts), 1)+")", refArgs(p.Contracts)...)
	}
	if len(p.RolesCurrency) > 0 {
		rcs := make([]any, len(p.RolesCurrency))
		for i, rc := range p.RolesCurrency {
			rcs[i] = NonNil(rc)
		}
		w.add("EXISTS (SELECT 1 FROM cv_payouts rp WHERE rp.withdrawal_tx = w.tx_id AND rp.contract_id = w.contract_id"+
			" AND rp.roles_currency IN ("+marks(len(rcs), 1)+"))", rcs...)
	}
	return w
}

// withdrawalGroups reads the rows of a page of at most limit withdrawals
// (one row per contract) grouped by transaction, and whether more follow.
// A transaction's rows have consecutive seqs; a page never ends inside
// one: the last group, maybe cut short, starts the next page, unless it is
// the only one, which is then read to its end.
func withdrawalGroups(ctx context.Context, q Querier, w where, limit int, desc bool) ([][]withdrawalRow, bool, error) {
	rows, err := withdrawalRows(ctx, q, w, limit+1, desc)
	if err != nil {
		return nil, false, err
	}
	var groups [][]withdrawalRow
	for _, r := range rows {
		if n := len(groups); n > 0 && groups[n-1][0].tx == r.tx {
			groups[n-1] = append(groups[n-1], r)
		} else {
			groups = append(groups, []withdrawalRow{r})
		}
	}
	if len(rows) <= limit {
		return groups, false, nil
	}
	if len(groups) > 1 {
		return groups[:len(groups)-1], true, nil
	}
	last := groups[0][len(groups[0])-1]
	more := where{conds: slicesClone(w.conds[1:]), args: slicesClone(w.args[1:])}
	more.add("w.tx_id = ?", append([]byte(nil), last.tx[:]...))
	if desc {
		more.add("w.seq < ?", last.seq)
	} else {
		more.add("w.seq > ?", last.seq)
	}
	rest, err := withdrawalRows(ctx, q, more, 0, desc)
	if err != nil {
		return nil, false, err
	}
	groups[0] = append(groups[0], rest...)
	return groups, true, nil
}

func slicesClone[T any](s []T) []T { return append([]T(nil), s...) }

// withdrawalRows reads cv_withdrawals rows in seq order (descending when
// desc); limit 0 reads all.
func withdrawalRows(ctx context.Context, q Querier, w where, limit int, desc bool) ([]withdrawalRow, error) {
	sql := `SELECT w.tx_id, w.seq, w.slot, w.block_no, w.block_hash FROM cv_withdrawals w` + w.String() + ` ORDER BY w.seq`
	if desc {
		sql += ` DESC`
	}
	args := w.args
	if limit > 0 {
		sql += ` LIMIT ?`
		args = append(slicesClone(args), limit)
	}
	var out []withdrawalRow
	var tx []byte
	var seq int64
	var b blockScan
	err := each(ctx, q, sql, args, append([]any{&tx, &seq}, b.dest()...), func() error {
		h, err := HashFrom(tx)
		if err != nil {
			return err
		}
		bh, err := b.header()
		out = append(out, withdrawalRow{tx: h, seq: seq, block: bh})
		return err
	})
	return out, err
}

// WithdrawalGet reads the withdrawal of a transaction; q must be a read
// transaction.
func WithdrawalGet(ctx context.Context, q Querier, tx chain.Hash32) (*contractstore.Withdrawal, contractstore.Position, error) {
	at, err := position(ctx, q)
	if err != nil {
		return nil, at, err
	}
	var w where
	w.add("w.tx_id = ?", append([]byte(nil), tx[:]...))
	rows, err := withdrawalRows(ctx, q, w, 0, false)
	if err != nil {
		return nil, at, err
	}
	if len(rows) == 0 {
		return nil, at, contractstore.ErrNotFound
	}
	out := &contractstore.Withdrawal{TxID: tx, Seq: rows[0].seq, LastSeq: rows[len(rows)-1].seq, Block: rows[0].block}
	var s payoutScan
	out.Payouts, err = collect(ctx, q, `SELECT `+payoutCols+` FROM cv_payouts p WHERE p.withdrawal_tx = ? ORDER BY p.withdrawal_seq, p.payout_id`,
		[]any{append([]byte(nil), tx[:]...)}, s.dest(), s.payout)
	return out, at, err
}
