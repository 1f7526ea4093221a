package cvsql

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/storage"
)

// queryOne runs a statement expected to return at most one row and scans
// it; found is false for none.
func queryOne(ctx context.Context, q Querier, sql string, args []any, dest ...any) (found bool, err error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return false, rows.Err()
	}
	if err := rows.Scan(dest...); err != nil {
		return false, err
	}
	return true, rows.Err()
}

// each runs a statement and calls fn after scanning each row into dest.
func each(ctx context.Context, q Querier, sql string, args []any, dest []any, fn func() error) error {
	rows, err := q.Query(ctx, sql, args...)
	return storage.EachRow(rows, err, dest, fn)
}

// collect runs a statement and returns the item of each row, which item
// makes of what dest scanned.
func collect[T any](ctx context.Context, q Querier, sql string, args, dest []any, item func() (*T, error)) ([]T, error) {
	var out []T
	err := each(ctx, q, sql, args, dest, func() error {
		v, err := item()
		if err == nil {
			out = append(out, *v)
		}
		return err
	})
	return out, err
}

// collectPage is collect of a page of at most limit items, and whether
// there are more: sql ends in a LIMIT, which it gives limit+1 after args.
func collectPage[T any](ctx context.Context, q Querier, sql string, args []any, limit int, dest []any, item func() (*T, error)) ([]T, bool, error) {
	out, err := collect(ctx, q, sql, append(args, limit+1), dest, item)
	if err != nil || len(out) <= limit {
		return out, false, err
	}
	return out[:limit], true, nil
}

// errNoHead reports a store whose cursor row is missing (Init not run).
var errNoHead = fmt.Errorf("the cursor row is missing: the contract store was not initialised")

// HeadGet reads the cursor row.
func HeadGet(ctx context.Context, q Querier) (contractstore.Head, error) {
	var h headScan
	found, err := queryOne(ctx, q, `SELECT `+HeadCols+` FROM cv_head k WHERE k.id = 1`, nil, h.dest()...)
	if err != nil {
		return contractstore.Head{}, err
	}
	if !found {
		return contractstore.Head{}, errNoHead
	}
	return h.head()
}

// position reads the cursor row's position.
func position(ctx context.Context, q Querier) (contractstore.Position, error) {
	h, err := HeadGet(ctx, q)
	return h.Position, err
}

// ContractsAfterSlot lists the contracts last changed in a block after slot.
func ContractsAfterSlot(ctx context.Context, q Querier, slot uint64) ([]contractstore.ContractRef, error) {
	var out []contractstore.ContractRef
	var id []byte
	var status string
	err := each(ctx, q, `SELECT contract_id, status FROM cv_contracts WHERE last_slot > ? ORDER BY created_seq`,
		[]any{int64(slot)}, []any{&id, &status}, func() error {
			ref, err := RefFrom(id)
			out = append(out, contractstore.ContractRef{ID: ref, Open: status == string(contractstore.StatusOpen)})
			return err
		})
	return out, err
}

// withHead reads one row of a store's table and the cursor in one
// statement: SELECT the cursor's columns, then sql (the row's columns,
// FROM cv_head k LEFT JOIN the table ... WHERE k.id = 1), scanning the
// row into dest and decoding it with row (nil for no row: not found).
func withHead[T any](ctx context.Context, q Querier, sql string, args []any, dest []any, row func() (*T, error)) (*T, contractstore.Position, error) {
	var h headScan
	found, err := queryOne(ctx, q, `SELECT `+HeadCols+`, `+sql, args, append(h.dest(), dest...)...)
	if err != nil {
		return nil, contractstore.Position{}, err
	}
	if !found {
		return nil, contractstore.Position{}, errNoHead
	}
	head, err := h.head()
	if err != nil {
		return nil, head.Position, err
	}
	out, err := row()
	if err == nil && out == nil {
		err = contractstore.ErrNotFound
	}
	return out, head.Position, err
}

// ContractGet reads one contract and the cursor in one statement.
func ContractGet(ctx context.Context, q Querier, id chain.TxOutRef) (*contractstore.Contract, contractstore.Position, error) {
	var c contractScan
	return withHead(ctx, q, contractCols+`, c.body FROM cv_head k
		LEFT JOIN cv_contracts c ON c.contract_id = ? WHERE k.id = 1`, []any{RefBytes(id)}, c.dest(true), c.contract)
}

// where collects the conditions and arguments of a statement.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, args ...any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

// String returns the WHERE clause ("" for no condition).
func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// contractListQuery builds the statement of a contract page. Its rows are
// in list order and may hold a contract twice (consecutively); the caller
// drops repeats and keeps limit+1 rows.
//
// A page costs the page, not the store. Each value of the filter's most
// selective list (its tags, else its parties) has an index in creation
// order (tag, created_seq; address, created_seq; role, created_seq), so the
// statement reads, for each value, the first limit+1 contracts that have it
// and pass the other conditions, and merges those runs: the first limit+1
// of the merge are the page. Testing every contract in creation order costs
// the contracts before the page's last match (every contract, for a rare
// filter), and a hashed semi-join costs every contract with the value.
func contractListQuery(p *contractstore.ContractListParams) (sql string, args []any, limit int) {
	limit = clampLimit(p.Limit)
	drives, w := contractFilterSQL(&p.Filter)
	// The page's start: after p.After, or at p.From (its creation seq
	// looked up in the same statement).
	seqCond := func(col string) (string, []any, bool) {
		switch {
		case p.From != nil && p.Descending:
			return col + " <= (SELECT f.created_seq FROM cv_contracts f WHERE f.contract_id = ?)", []any{RefBytes(*p.From)}, true
		case p.From != nil:
			return col + " >= (SELECT f.created_seq FROM cv_contracts f WHERE f.contract_id = ?)", []any{RefBytes(*p.From)}, true
		case p.After <= 0:
			return "", nil, false
		case p.Descending:
			return col + " < ?", []any{p.After}, true
		}
		return col + " > ?", []any{p.After}, true
	}
	order := " ORDER BY %s"
	if p.Descending {
		order += " DESC"
	}
	if len(drives) == 0 {
		if cond, args, ok := seqCond("c.created_seq"); ok {
			w.add(cond, args...)
		}
		return `SELECT ` + contractCols + ` FROM cv_contracts c` + w.String() + fmt.Sprintf(order, "c.created_seq") + ` LIMIT ?`,
			append(w.args, limit+1), limit
	}
	var parts []string
	for _, d := range drives {
		dw := where{conds: []string{d.cond}, args: slices.Clone(d.args)}
		if cond, args, ok := seqCond("d.created_seq"); ok {
			dw.add(cond, args...)
		}
		dw.conds = append(dw.conds, w.conds...)
		dw.args = append(dw.args, w.args...)
		parts = append(parts, `SELECT `+contractCols+` FROM `+d.from+` d JOIN cv_contracts c ON c.contract_id = d.contract_id`+
			dw.String()+fmt.Sprintf(order, "d.created_seq")+` LIMIT ?`)
		args = append(args, dw.args...)
		args = append(args, limit+1)
	}
	if len(parts) == 1 {
		return parts[0], args, limit
	}
	for i := range parts {
		parts[i] = fmt.Sprintf("SELECT * FROM (%s) AS d%d", parts[i], i)
	}
	return `SELECT * FROM (` + strings.Join(parts, " UNION ALL ") + `) AS u` + fmt.Sprintf(order, "u.created_seq"), args, limit
}

// drive is one value of a filter's most selective list: the index table
// (as d, joined to cv_contracts c) whose rows with the value lead to the
// contracts that have it.
type drive struct {
	from string
	cond string
	args []any
}

// contractFilterSQL returns a filter's drives (its tags, else its parties;
// none when it has neither) and the conditions on the contract itself, with
// the party condition when parties do not drive.
func contractFilterSQL(f *contractstore.ContractFilter) ([]drive, where) {
	var drives []drive
	partiesDrive := false
	switch {
	case len(f.Tags) > 0:
		for _, t := range uniqueStrings(f.Tags) {
			drives = append(drives, drive{"cv_contract_tags", "d.tag = ?", []any{[]byte(t)}})
		}
	case len(f.PartyAddress) > 0 || len(f.PartyRole) > 0:
		partiesDrive = true
		for _, a := range uniqueStrings(f.PartyAddress) {
			drives = append(drives, drive{"cv_contract_parties", "d.address = ?", []any{a}})
		}
		seen := map[string]bool{}
		for _, r := range f.PartyRole {
			key := string(r.Currency) + "\x00" + string(r.Name)
			if seen[key] {
				continue
			}
			seen[key] = true
			drives = append(drives, drive{"cv_contract_parties", "d.role_currency = ? AND d.role_name = ?",
				[]any{NonNil(r.Currency), NonNil(r.Name)}})
		}
	}
	var w where
	if len(f.Contracts) > 0 {
		w.add("c.contract_id IN ("+marks(len(f.Contracts), 1)+")", refArgs(f.Contracts)...)
	}
	if f.Status != "" {
		w.add("c.status = ?", string(f.Status))
	}
	if len(f.RolesCurrency) > 0 {
		args := make([]any, len(f.RolesCurrency))
		for i, rc := range f.RolesCurrency {
			args[i] = NonNil(rc)
		}
		w.add("c.roles_currency IN ("+marks(len(args), 1)+")", args...)
	}
	if !partiesDrive && (len(f.PartyAddress) > 0 || len(f.PartyRole) > 0) {
		var alts []string
		var args []any
		for _, a := range f.PartyAddress {
			alts = append(alts, "pa.address = ?")
			args = append(args, a)
		}
		for _, r := range f.PartyRole {
			alts = append(alts, "(pa.role_currency = ? AND pa.role_name = ?)")
			args = append(args, NonNil(r.Currency), NonNil(r.Name))
		}
		w.add("EXISTS (SELECT 1 FROM cv_contract_parties pa WHERE pa.contract_id = c.contract_id AND ("+
			strings.Join(alts, " OR ")+"))", args...)
	}
	return drives, w
}

// uniqueStrings returns ss without repeats, in first-seen order.
func uniqueStrings(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// appendContract adds a row of a contract page unless it repeats the last
// one (a contract found through two of the filter's values).
func appendContract(page *contractstore.ContractPage, c *contractstore.Contract) {
	if n := len(page.Contracts); n > 0 && page.Contracts[n-1].Seq == c.Seq {
		return
	}
	page.Contracts = append(page.Contracts, *c)
}

// finishContractPage trims the page and sets its total: from the
// counters when they give it, else counted when p asks for it.
func finishContractPage(ctx context.Context, q Querier, c *Counts, page *contractstore.ContractPage, head contractstore.Head,
	p *contractstore.ContractListParams, limit int) error {
	if len(page.Contracts) > limit {
		page.Contracts, page.More = page.Contracts[:limit], true
	}
	var err error
	page.Total, err = contractTotal(ctx, q, c, head, p)
	return err
}

// ContractList reads a page of contract headers; q must be a read
// transaction (the cursor, the page and its count are read in one
// snapshot).
func ContractList(ctx context.Context, q Querier, counts *Counts, p *contractstore.ContractListParams) (*contractstore.ContractPage, error) {
	head, err := HeadGet(ctx, q)
	if err != nil {
		return nil, err
	}
	sql, args, limit := contractListQuery(p)
	page := &contractstore.ContractPage{At: head.Position, Contracts: make([]contractstore.Contract, 0, pageCap(limit))}
	var c contractScan
	err = each(ctx, q, sql, args, c.dest(false), func() error {
		ct, err := c.contract()
		if err == nil {
			appendContract(page, ct)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := finishContractPage(ctx, q, counts, page, head, p, limit); err != nil {
		return nil, err
	}
	return page, nil
}

// ContractListLateral reads a page of contract headers and the cursor in
// one statement (a LATERAL join, which PostgreSQL has and SQLite has not):
// one snapshot without a transaction. Its total is the counters' only (a
// count needs a transaction: ContractList).
func ContractListLateral(ctx context.Context, q Querier, p *contractstore.ContractListParams) (*contractstore.ContractPage, error) {
	inner, args, limit := contractListQuery(p)
	order := "c.created_seq"
	if p.Descending {
		order += " DESC"
	}
	var h headScan
	var c contractScan
	page := &contractstore.ContractPage{Contracts: make([]contractstore.Contract, 0, pageCap(limit))}
	var head contractstore.Head
	rows := 0
	err := each(ctx, q, `SELECT `+HeadCols+`, c.* FROM cv_head k LEFT JOIN LATERAL (`+inner+`) c ON true WHERE k.id = 1 ORDER BY `+order,
		args, append(h.dest(), c.dest(false)...), func() error {
			var err error
			if rows == 0 {
				if head, err = h.head(); err != nil {
					return err
				}
			}
			rows++
			ct, err := c.contract()
			if err == nil && ct != nil {
				appendContract(page, ct)
			}
			return err
		})
	if err != nil {
		return nil, err
	}
	if rows == 0 {
		return nil, errNoHead
	}
	page.At = head.Position
	counters := *p
	counters.Count = false
	if err := finishContractPage(ctx, q, nil, page, head, &counters, limit); err != nil {
		return nil, err
	}
	return page, nil
}

// pageCap is the room a page of limit rows is read into: the page and the
// row that tells whether more follow, held once, not regrown row by row
// (a page of 100 contract headers regrown by append allocates twice its
// size); bounded for large limits, which append then grows.
func pageCap(limit int) int { return min(limit, 200) + 1 }

func clampLimit(n int) int {
	if n <= 0 || n > contractstore.MaxLimit {
		return contractstore.MaxLimit
	}
	return n
}

// TransactionList reads a page of a contract's steps (and, when p asks,
// counts them); q must be a read transaction.
func TransactionList(ctx context.Context, q Querier, c *Counts, p *contractstore.TransactionListParams) (*contractstore.TransactionPage, error) {
	at, err := position(ctx, q)
	if err != nil {
		return nil, err
	}
	page := &contractstore.TransactionPage{At: at}
	limit := clampLimit(p.Limit)
	var t txScan
	cols := txCols
	if p.WithPayload {
		cols += ", t.payload"
	}
	var w where
	w.add("t.contract_id = ?", RefBytes(p.Contract))
	order := " ORDER BY t.seq LIMIT ?"
	switch {
	case !p.Descending:
		w.add("t.seq > ?", p.After)
	case p.After > 0:
		w.add("t.seq < ?", p.After)
	}
	if p.Descending {
		order = " ORDER BY t.seq DESC LIMIT ?"
	}
	if p.AppliedOnly {
		w.add("t.kind = 'applied'")
	}
	page.Transactions, page.More, err = collectPage(ctx, q, `SELECT `+cols+` FROM cv_transactions t`+w.String()+order, w.args, limit, t.dest(p.WithPayload), t.transaction)
	if err != nil {
		return nil, err
	}
	cw := where{conds: []string{"t.contract_id = ?"}, args: []any{RefBytes(p.Contract)}}
	if p.AppliedOnly {
		cw.add("t.kind = 'applied'")
	}
	if page.Total, err = c.total(ctx, q, at.Seq, p.Count, `SELECT count(*) FROM cv_transactions t`+cw.String(), cw.args); err != nil {
		return nil, err
	}
	if len(page.Transactions) == 0 {
		var one int
		found, err := queryOne(ctx, q, `SELECT 1 FROM cv_contracts WHERE contract_id = ?`, []any{RefBytes(p.Contract)}, &one)
		if err != nil {
			return nil, err
		}
		if !found {
			return page, contractstore.ErrNotFound
		}
	}
	return page, nil
}

// TransactionGet reads one step and the cursor in one statement.
func TransactionGet(ctx context.Context, q Querier, contract chain.TxOutRef, tx chain.Hash32) (*contractstore.Transaction, contractstore.Position, error) {
	return transactionWhere(ctx, q, "t.tx_id = ?", RefBytes(contract), append([]byte(nil), tx[:]...))
}

// TransactionProducing reads the step of a contract that made the contract
// output out, and the cursor, in one statement.
func TransactionProducing(ctx context.Context, q Querier, contract, out chain.TxOutRef) (*contractstore.Transaction, contractstore.Position, error) {
	return transactionWhere(ctx, q, "t.output = ?", RefBytes(contract), RefBytes(out))
}

// TransactionSpending reads the applied step of a contract that spent the
// contract output in, and the cursor, in one statement.
func TransactionSpending(ctx context.Context, q Querier, contract, in chain.TxOutRef) (*contractstore.Transaction, contractstore.Position, error) {
	return transactionWhere(ctx, q, "t.input = ? AND t.kind = 'applied'", RefBytes(contract), RefBytes(in))
}

// TransactionOfTx reads the step a transaction made (applied or rejected),
// of whichever contract, and the cursor, in one statement; by the
// cv_transactions_tx index. A transaction steps at most one contract (the
// Marlowe validator refuses a second Marlowe input); were there several, the
// first in chain order is the one read.
func TransactionOfTx(ctx context.Context, q Querier, tx chain.Hash32) (*contractstore.Transaction, contractstore.Position, error) {
	var t txScan
	return withHead(ctx, q, txCols+`, t.payload FROM cv_head k
		LEFT JOIN cv_transactions t ON t.seq = (SELECT min(x.seq) FROM cv_transactions x WHERE x.tx_id = ?) WHERE k.id = 1`,
		[]any{append([]byte(nil), tx[:]...)}, t.dest(true), t.transaction)
}

// transactionWhere reads the step of a contract that matches cond (on one
// more argument) with the cursor; the contract's steps are found by the
// (contract_id, seq) index and are few.
func transactionWhere(ctx context.Context, q Querier, cond string, contract []byte, arg []byte) (*contractstore.Transaction, contractstore.Position, error) {
	var t txScan
	return withHead(ctx, q, txCols+`, t.payload FROM cv_head k
		LEFT JOIN cv_transactions t ON t.contract_id = ? AND `+cond+` WHERE k.id = 1`,
		[]any{contract, arg}, t.dest(true), t.transaction)
}
