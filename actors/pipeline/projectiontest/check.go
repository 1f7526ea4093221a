package projectiontest

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
)

// Summary counts what a check compared.
type Summary struct {
	Seq          int64
	Contracts    int
	Open         int
	Transactions int
	Payouts      int
	Withdrawals  int
}

// CheckAgainstFold compares everything the projection holds with a fold,
// from scratch, of the log's records current as of the seq the projection
// has applied: contracts with their bodies, steps with their payloads,
// payouts, withdrawals, the counters, and the tag and party indexes through
// the list filters. The projection must be idle (call Sync first).
func (p *Pipeline) CheckAgainstFold() Summary {
	tb := p.tb
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := p.Contracts
	head, err := b.HeadGet(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	want, err := contracts.Fold(ctx, p.History, head.Seq, nil, p.log)
	if err != nil {
		tb.Fatal(err)
	}
	if head != want.Head {
		tb.Fatalf("head %+v, a fold from scratch gives %+v", head, want.Head)
	}
	sum := Summary{Seq: head.Seq, Contracts: len(want.Contracts), Open: int(want.Head.OpenContracts)}
	wantContracts := p.checkContracts(ctx, want, &sum)
	p.checkPayouts(ctx, want, &sum)
	p.checkWithdrawals(ctx, want, &sum)
	p.checkIndexes(ctx, want, wantContracts)
	return sum
}

// readAll reads every page of a list: page reads the one after last (nil:
// the first), and says whether more follow.
func readAll[T any](tb testing.TB, page func(last *T) (items []T, more bool, err error)) []T {
	tb.Helper()
	var all []T
	var last *T
	for {
		items, more, err := page(last)
		if err != nil {
			tb.Fatal(err)
		}
		all = append(all, items...)
		if !more || len(items) == 0 {
			return all
		}
		last = &items[len(items)-1]
	}
}

// checkContracts compares the contracts, in creation order, with their
// bodies and steps; it returns the fold's, in that order.
func (p *Pipeline) checkContracts(ctx context.Context, want *contractstore.CommitParams, sum *Summary) []contractstore.Contract {
	tb, b := p.tb, p.Contracts
	tb.Helper()
	got := readAll(tb, func(last *contractstore.Contract) ([]contractstore.Contract, bool, error) {
		q := &contractstore.ContractListParams{Limit: 1000}
		if last != nil {
			q.After = last.Seq
		}
		page, err := b.ContractList(ctx, q)
		if err != nil {
			return nil, false, err
		}
		return page.Contracts, page.More, nil
	})
	wantContracts := slices.Clone(want.Contracts)
	slices.SortFunc(wantContracts, func(a, b contractstore.Contract) int { return int(a.Seq - b.Seq) })
	if len(got) != len(wantContracts) {
		tb.Fatalf("%d contracts, a fold from scratch gives %d", len(got), len(wantContracts))
	}
	txs := map[chain.TxOutRef][]contractstore.Transaction{}
	for _, t := range want.Transactions {
		txs[t.ContractID] = append(txs[t.ContractID], t)
	}
	for i := range wantContracts {
		w := &wantContracts[i]
		if got[i].ID != w.ID {
			tb.Fatalf("contract %d is %s, a fold from scratch gives %s", i, got[i].ID, w.ID)
		}
		c, _, err := b.ContractGet(ctx, w.ID)
		if err != nil {
			tb.Fatal(err)
		}
		same(tb, "contract "+w.ID.String(), normal(c), normal(w))
		var gotTx []contractstore.Transaction
		page, err := b.TransactionList(ctx, &contractstore.TransactionListParams{Contract: w.ID, Limit: 1000})
		if err != nil {
			tb.Fatal(err)
		}
		for _, t := range page.Transactions {
			full, _, err := b.TransactionGet(ctx, w.ID, t.TxID)
			if err != nil {
				tb.Fatal(err)
			}
			gotTx = append(gotTx, *full)
		}
		same(tb, "transactions of "+w.ID.String(), gotTx, txs[w.ID])
		sum.Transactions += len(gotTx)
	}
	return wantContracts
}

// checkPayouts compares the payouts, all made in the fold (none is
// withdrawn from an earlier one).
func (p *Pipeline) checkPayouts(ctx context.Context, want *contractstore.CommitParams, sum *Summary) {
	tb, b := p.tb, p.Contracts
	tb.Helper()
	if len(want.PayoutsWithdrawn) != 0 {
		tb.Fatal("a fold from scratch withdrew a payout it had not made")
	}
	gotPayouts := readAll(tb, func(last *contractstore.Payout) ([]contractstore.Payout, bool, error) {
		q := &contractstore.PayoutListParams{Limit: 1000}
		if last != nil {
			q.After = &contractstore.PayoutKey{Seq: last.Seq, ID: last.ID}
		}
		page, err := b.PayoutList(ctx, q)
		if err != nil {
			return nil, false, err
		}
		return page.Payouts, page.More, nil
	})
	wantPayouts := slices.Clone(want.Payouts)
	slices.SortFunc(wantPayouts, func(a, b contractstore.Payout) int {
		if a.Seq != b.Seq {
			return int(a.Seq - b.Seq)
		}
		return a.ID.Compare(b.ID)
	})
	for i := range wantPayouts {
		wantPayouts[i].RolesCurrency = nonNil(wantPayouts[i].RolesCurrency)
	}
	same(tb, "payouts", gotPayouts, wantPayouts)
	sum.Payouts = len(gotPayouts)
}

// checkWithdrawals compares the withdrawals: the rows, grouped by
// transaction.
func (p *Pipeline) checkWithdrawals(ctx context.Context, want *contractstore.CommitParams, sum *Summary) {
	tb, b := p.tb, p.Contracts
	tb.Helper()
	wl, err := b.WithdrawalList(ctx, &contractstore.WithdrawalListParams{Limit: 1000})
	if err != nil {
		tb.Fatal(err)
	}
	var gotRows, wantRows []int64
	for _, w := range wl.Withdrawals {
		gotRows = append(gotRows, w.Seq)
		for _, po := range w.Payouts {
			if po.Withdrawal == nil || po.Withdrawal.TxID != w.TxID {
				tb.Fatalf("withdrawal %s lists payout %s withdrawn by %v", w.TxID, po.ID, po.Withdrawal)
			}
		}
	}
	var lastTx chain.Hash32
	for i, w := range want.Withdrawals {
		if i == 0 || w.TxID != lastTx {
			wantRows = append(wantRows, w.Seq)
		}
		lastTx = w.TxID
	}
	if !wl.More && !slices.Equal(gotRows, wantRows) {
		tb.Fatalf("withdrawals at seqs %v, a fold from scratch gives %v", gotRows, wantRows)
	}
	sum.Withdrawals = len(gotRows)
}

// checkIndexes compares the tag and party filters with the fold's rows.
func (p *Pipeline) checkIndexes(ctx context.Context, want *contractstore.CommitParams, all []contractstore.Contract) {
	tb := p.tb
	byFilter := map[string][]chain.TxOutRef{}
	filters := map[string]contractstore.ContractFilter{}
	for _, t := range want.Tags {
		k := "tag " + t.Tag
		byFilter[k] = append(byFilter[k], t.ContractID)
		filters[k] = contractstore.ContractFilter{Tags: []string{t.Tag}}
	}
	seen := map[string]bool{}
	for _, pt := range want.Parties {
		var k string
		var f contractstore.ContractFilter
		if pt.Party.Address != "" {
			k, f = "address "+pt.Party.Address, contractstore.ContractFilter{PartyAddress: []string{pt.Party.Address}}
		} else {
			k = "role " + string(pt.Party.RoleCurrency) + "." + string(pt.Party.Role)
			f = contractstore.ContractFilter{PartyRole: []record.RoleRef{{Currency: nonNil(pt.Party.RoleCurrency), Name: pt.Party.Role}}}
		}
		if !seen[k] && len(seen) >= 40 {
			continue
		}
		seen[k] = true
		if !slices.Contains(byFilter[k], pt.ContractID) {
			byFilter[k] = append(byFilter[k], pt.ContractID)
		}
		filters[k] = f
	}
	order := map[chain.TxOutRef]int64{}
	for _, c := range all {
		order[c.ID] = c.Seq
	}
	for k, f := range filters {
		page, err := p.Contracts.ContractList(ctx, &contractstore.ContractListParams{Filter: f, Limit: 1000})
		if err != nil {
			tb.Fatal(err)
		}
		var got []chain.TxOutRef
		for _, c := range page.Contracts {
			got = append(got, c.ID)
		}
		w := slices.Clone(byFilter[k])
		slices.SortFunc(w, func(a, b chain.TxOutRef) int { return int(order[a] - order[b]) })
		if !slices.Equal(got, w) {
			tb.Fatalf("filter %s: %v, a fold from scratch gives %v", k, got, w)
		}
	}
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// normal prepares a contract for comparison: roles currency never nil,
// JSON objects compact.
func normal(c *contractstore.Contract) *contractstore.Contract {
	out := *c
	out.RolesCurrency = nonNil(c.RolesCurrency)
	out.Tags, out.Metadata = compact(c.Tags), compact(c.Metadata)
	return &out
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// same fails unless a and b marshal to the same JSON.
func same(tb interface {
	Helper()
	Fatalf(string, ...any)
}, what string, a, b any) {
	tb.Helper()
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
		i := 0
		for i < len(x) && i < len(y) && x[i] == y[i] {
			i++
		}
		from := max(0, i-300)
		tb.Fatalf("%s differs from a fold from scratch at byte %d:\n got …%s\nwant …%s", what, i,
			x[from:min(len(x), i+300)], y[from:min(len(y), i+300)])
	}
}
