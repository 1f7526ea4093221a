package contractstoretest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/record"
)

// listTransactions reads every page of a contract's steps from p (After
// moves on to the last seq of each page), each at the model's head.
func listTransactions(t *testing.T, b contractstore.Backend, m *model, p contractstore.TransactionListParams) []contractstore.Transaction {
	t.Helper()
	var got []contractstore.Transaction
	for {
		page, err := b.TransactionList(ctxOf(t), &p)
		if err != nil {
			t.Fatal(err)
		}
		if page.At != m.head.Position {
			t.Fatalf("position %+v, want %+v", page.At, m.head.Position)
		}
		got = append(got, page.Transactions...)
		if !page.More {
			return got
		}
		p.After = page.Transactions[len(page.Transactions)-1].Seq
	}
}

func testTransactions(t *testing.T, b contractstore.Backend) {
	ctx := ctxOf(t)
	m, _ := fillStore(t, b, 6)
	for id, want := range m.txs {
		for _, limit := range []int{1, 3, 1000} {
			got := listTransactions(t, b, m, contractstore.TransactionListParams{Contract: id, Limit: limit})
			if len(got) != len(want) {
				t.Fatalf("%s: %d transactions, want %d", id, len(got), len(want))
			}
			for k := range got {
				if got[k].Payload != nil {
					t.Fatal("a list returned a payload")
				}
				w := want[k]
				w.Payload = nil
				if !equalJSONOf(got[k], w) {
					t.Fatalf("%s: transaction\n got %+v\nwant %+v", id, got[k], w)
				}
			}
		}
		// Newest first, pages resuming before the last seq.
		for _, limit := range []int{1, 2, 1000} {
			got := listTransactions(t, b, m, contractstore.TransactionListParams{Contract: id, Descending: true, Limit: limit})
			if len(got) != len(want) {
				t.Fatalf("%s descending: %d transactions, want %d", id, len(got), len(want))
			}
			for k := range got {
				if got[k].Seq != want[len(want)-1-k].Seq {
					t.Fatalf("%s descending: seq %d at %d, want %d", id, got[k].Seq, k, want[len(want)-1-k].Seq)
				}
			}
		}
		// Applied steps only, with their payloads, in both orders.
		var applied []contractstore.Transaction
		for _, w := range want {
			if w.Kind == contractstore.TxApplied {
				applied = append(applied, w)
			}
		}
		for _, desc := range []bool{false, true} {
			got := listTransactions(t, b, m, contractstore.TransactionListParams{Contract: id, Descending: desc,
				AppliedOnly: true, WithPayload: true, Limit: 2})
			if desc {
				slices.Reverse(got)
			}
			if !equalJSONOf(got, applied) {
				t.Fatalf("%s: applied steps (descending %v)\n got %+v\nwant %+v", id, desc, got, applied)
			}
		}
		for _, w := range want {
			got, at, err := b.TransactionGet(ctx, id, w.TxID)
			if err != nil || at != m.head.Position {
				t.Fatalf("get: %v at %+v", err, at)
			}
			if !equalJSONOf(got, &w) {
				t.Fatalf("%s %s:\n got %+v\nwant %+v", id, w.TxID, got, w)
			}
			byTx, at, err := b.TransactionOfTx(ctx, w.TxID)
			if err != nil || at != m.head.Position || !equalJSONOf(byTx, &w) {
				t.Fatalf("%s: the step of transaction %s: %+v (%v at %+v), want %+v", id, w.TxID, byTx, err, at, w)
			}
		}
		testStepLinks(t, b, m, id, want)
	}
	// A contract without steps lists none, without error.
	for id := range m.contracts {
		if len(m.txs[id]) == 0 {
			page, err := b.TransactionList(ctx, &contractstore.TransactionListParams{Contract: id, Limit: 10})
			if err != nil || len(page.Transactions) != 0 {
				t.Fatalf("%s: %v %v", id, page, err)
			}
		}
	}
}

// testStepLinks checks that each output of a contract leads to the step that
// made it and to the applied step that spent it.
func testStepLinks(t *testing.T, b contractstore.Backend, m *model, id chain.TxOutRef, steps []contractstore.Transaction) {
	ctx := ctxOf(t)
	spender := map[chain.TxOutRef]*contractstore.Transaction{}
	for i := range steps {
		if st := &steps[i]; st.Kind == contractstore.TxApplied && spender[st.Input] == nil {
			spender[st.Input] = st
		}
	}
	for i := range steps {
		st := &steps[i]
		if st.Output != nil {
			got, at, err := b.TransactionProducing(ctx, id, *st.Output)
			if err != nil || at != m.head.Position || !equalJSONOf(got, st) {
				t.Fatalf("%s: producing %s: %+v (%v), want %+v", id, st.Output, got, err, st)
			}
			next, _, err := b.TransactionSpending(ctx, id, *st.Output)
			switch want := spender[*st.Output]; {
			case want == nil && !errors.Is(err, contractstore.ErrNotFound):
				t.Fatalf("%s: spending the unspent %s: %+v (%v)", id, st.Output, next, err)
			case want != nil && (err != nil || !equalJSONOf(next, want)):
				t.Fatalf("%s: spending %s: %+v (%v), want %+v", id, st.Output, next, err, want)
			}
		}
		if _, _, err := b.TransactionProducing(ctx, id, chain.TxOutRef{TxID: st.TxID, Index: 77}); !errors.Is(err, contractstore.ErrNotFound) {
			t.Fatalf("%s: producing an output no step made: %v", id, err)
		}
	}
	// A creation's transaction stepped no contract (unless the model has it
	// step one too).
	stepped := false
	for _, steps := range m.txs {
		for _, st := range steps {
			stepped = stepped || st.TxID == id.TxID
		}
	}
	if _, _, err := b.TransactionOfTx(ctx, id.TxID); !stepped && !errors.Is(err, contractstore.ErrNotFound) {
		t.Fatalf("%s: the creation's transaction as a step: %v", id, err)
	}
	// The first output was made by the creation, not by a step.
	if _, _, err := b.TransactionProducing(ctx, id, id); !errors.Is(err, contractstore.ErrNotFound) {
		t.Fatalf("%s: producing the creation's output: %v", id, err)
	}
	if want := spender[id]; want != nil {
		got, _, err := b.TransactionSpending(ctx, id, id)
		if err != nil || !equalJSONOf(got, want) {
			t.Fatalf("%s: spending the creation's output: %+v (%v), want %+v", id, got, err, want)
		}
	}
}

// modelPayouts answers a payout query from the model, in PayoutKey order.
func (m *model) payoutList(p *contractstore.PayoutListParams) []*contractstore.Payout {
	var out []*contractstore.Payout
	for _, po := range m.payouts {
		if len(p.Contracts) > 0 && !slices.Contains(p.Contracts, po.ContractID) {
			continue
		}
		if len(p.Roles) > 0 && (po.Role == nil || !slices.ContainsFunc(p.Roles, func(r record.RoleRef) bool {
			return bytes.Equal(r.Currency, po.RolesCurrency) && marlowe.NameText(r.Name) == *po.Role
		})) {
			continue
		}
		if p.Status != "" && po.Status != p.Status {
			continue
		}
		if p.RolesOnly && po.Role == nil {
			continue
		}
		out = append(out, po)
	}
	slices.SortFunc(out, func(a, b *contractstore.Payout) int {
		if a.Seq != b.Seq {
			return int(a.Seq - b.Seq)
		}
		return a.ID.Compare(b.ID)
	})
	if p.Descending {
		slices.Reverse(out)
	}
	return out
}

func testPayouts(t *testing.T, b contractstore.Backend) {
	ctx := ctxOf(t)
	m, _ := fillStore(t, b, 8)
	var someContracts []chain.TxOutRef
	for id := range m.contracts {
		if len(someContracts) < 3 {
			someContracts = append(someContracts, id)
		}
	}
	queries := []contractstore.PayoutListParams{
		{},
		{Status: contractstore.PayoutAvailable},
		{Status: contractstore.PayoutWithdrawn},
		{Status: contractstore.PayoutPaid},
		{Contracts: someContracts},
		{Roles: []record.RoleRef{{Currency: currencies[1], Name: []byte(roleNames[1])}}},
		{Roles: []record.RoleRef{{Currency: currencies[0], Name: []byte(roleNames[2])}, {Currency: currencies[2], Name: []byte(roleNames[0])}},
			Status: contractstore.PayoutAvailable},
		{RolesOnly: true},
		{RolesOnly: true, Descending: true},
		{Descending: true},
		{Contracts: someContracts, Status: contractstore.PayoutWithdrawn, Descending: true},
	}
	for i, q := range queries {
		want := m.payoutList(&q)
		for _, limit := range []int{2, 1000} {
			q := q
			q.Limit = limit
			var got []contractstore.Payout
			for {
				page, err := b.PayoutList(ctx, &q)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, page.Payouts...)
				if !page.More {
					break
				}
				last := page.Payouts[len(page.Payouts)-1]
				q.After = &contractstore.PayoutKey{Seq: last.Seq, ID: last.ID}
			}
			if len(got) != len(want) {
				t.Fatalf("query %d limit %d: %d payouts, want %d", i, limit, len(got), len(want))
			}
			for k := range got {
				if !equalJSONOf(got[k], want[k]) {
					gj, _ := json.Marshal(got[k])
					wj, _ := json.Marshal(want[k])
					t.Fatalf("query %d:\n got %s\nwant %s", i, gj, wj)
				}
			}
		}
	}
	for id, want := range m.payouts {
		got, at, err := b.PayoutGet(ctx, id)
		if err != nil || at != m.head.Position || !equalJSONOf(got, want) {
			t.Fatalf("%s: %+v at %+v (%v), want %+v", id, got, at, err, want)
		}
	}
}

// modelWithdrawals groups the model's withdrawal rows by transaction.
func (m *model) withdrawalList(contracts []chain.TxOutRef, rolesCurrency [][]byte) []contractstore.Withdrawal {
	rows := slices.Clone(m.withdrawals)
	slices.SortFunc(rows, func(a, b contractstore.WithdrawalRow) int { return int(a.Seq - b.Seq) })
	var out []contractstore.Withdrawal
	for _, r := range rows {
		if len(contracts) > 0 && !slices.Contains(contracts, r.ContractID) {
			continue
		}
		if len(rolesCurrency) > 0 && !slices.ContainsFunc(rolesCurrency, func(rc []byte) bool {
			for _, po := range m.payouts {
				if po.Withdrawal != nil && po.Withdrawal.TxID == r.TxID && po.ContractID == r.ContractID && bytes.Equal(po.RolesCurrency, rc) {
					return true
				}
			}
			return false
		}) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].TxID == r.TxID {
			out[n-1].LastSeq = r.Seq
		} else {
			out = append(out, contractstore.Withdrawal{TxID: r.TxID, Seq: r.Seq, LastSeq: r.Seq, Block: r.Block})
		}
	}
	for i := range out {
		var ps []*contractstore.Payout
		for _, po := range m.payouts {
			if po.Withdrawal != nil && po.Withdrawal.TxID == out[i].TxID && (len(contracts) == 0 || slices.Contains(contracts, po.ContractID)) {
				ps = append(ps, po)
			}
		}
		slices.SortFunc(ps, func(a, b *contractstore.Payout) int {
			if a.Withdrawal.Seq != b.Withdrawal.Seq {
				return int(a.Withdrawal.Seq - b.Withdrawal.Seq)
			}
			return a.ID.Compare(b.ID)
		})
		for _, po := range ps {
			out[i].Payouts = append(out[i].Payouts, *po)
		}
	}
	return out
}

func testWithdrawals(t *testing.T, b contractstore.Backend) {
	ctx := ctxOf(t)
	m, _ := fillStore(t, b, 10)
	var one []chain.TxOutRef
	for _, w := range m.withdrawals {
		one = []chain.TxOutRef{w.ContractID}
		break
	}
	type wq struct {
		contracts []chain.TxOutRef
		rcs       [][]byte
	}
	for _, q := range []wq{{}, {contracts: one}, {rcs: [][]byte{currencies[1]}}, {rcs: [][]byte{currencies[0], currencies[2]}}} {
		contracts := q.contracts
		want := m.withdrawalList(contracts, q.rcs)
		if len(want) == 0 {
			t.Fatalf("the generated data has no withdrawals for %+v", q)
		}
		for _, desc := range []bool{false, true} {
			if desc {
				want = slices.Clone(want)
				slices.Reverse(want)
			}
			for _, limit := range []int{1, 2, 1000} {
				var got []contractstore.Withdrawal
				var after int64
				for {
					page, err := b.WithdrawalList(ctx, &contractstore.WithdrawalListParams{Contracts: contracts, RolesCurrency: q.rcs,
						After: after, Descending: desc, Limit: limit})
					if err != nil {
						t.Fatal(err)
					}
					if len(page.Withdrawals) > limit {
						t.Fatalf("page of %d, limit %d", len(page.Withdrawals), limit)
					}
					got = append(got, page.Withdrawals...)
					if !page.More {
						break
					}
					after = page.Withdrawals[len(page.Withdrawals)-1].LastSeq
					if desc {
						after = page.Withdrawals[len(page.Withdrawals)-1].Seq
					}
				}
				if !equalJSONOf(got, want) {
					t.Fatalf("%+v desc %v limit %d: %d withdrawals, want %d\n got %+v\nwant %+v", q, desc, limit, len(got), len(want), got, want)
				}
			}
		}
		if contracts == nil && q.rcs == nil {
			for _, w := range want {
				got, at, err := b.WithdrawalGet(ctx, w.TxID)
				if err != nil || at != m.head.Position || !equalJSONOf(got, &w) {
					t.Fatalf("%s: %+v (%v), want %+v", w.TxID, got, err, w)
				}
			}
		}
	}
}

func testReset(t *testing.T, b contractstore.Backend) {
	ctx := ctxOf(t)
	m, g := fillStore(t, b, 8)
	// A rollback to the middle: the contracts changed after it are deleted
	// and those created before it come back with their creation only.
	slot := m.head.Block.Slot / 2
	refs, err := b.ContractsAfterSlot(ctx, slot)
	if err != nil || len(refs) == 0 {
		t.Fatalf("%d contracts after slot %d, %v", len(refs), slot, err)
	}
	g.seq++
	p := &contractstore.CommitParams{PrevSeq: m.head.Seq, Head: m.head}
	p.Head.Seq, p.Head.Block = g.seq, block(g.seq)
	for _, r := range refs {
		p.Reset = append(p.Reset, r.ID)
		c := *m.contracts[r.ID]
		p.Head.Contracts--
		if c.Status == contractstore.StatusOpen {
			p.Head.OpenContracts--
		}
		if c.Block.Slot > slot {
			continue
		}
		c.Status, c.Steps, c.LastSeq, c.LastBlock = contractstore.StatusOpen, 0, c.Seq, c.Block
		body := *c.Body
		body.Payouts, body.Contract, body.State = []contractstore.PayoutSummary{}, body.InitialContract, body.InitialState
		c.Body = &body
		p.Contracts = append(p.Contracts, c)
		p.Head.Contracts++
		p.Head.OpenContracts++
		for _, tag := range m.tags[r.ID] {
			p.Tags = append(p.Tags, contractstore.ContractTag{ContractID: r.ID, Seq: c.Seq, Tag: tag})
		}
		for _, party := range m.parties[r.ID] {
			p.Parties = append(p.Parties, contractstore.ContractParty{ContractID: r.ID, Seq: c.Seq, Party: party})
		}
	}
	if err := b.Commit(ctx, p); err != nil {
		t.Fatal(err)
	}
	m.apply(p)
	for _, r := range refs {
		got, _, err := b.ContractGet(ctx, r.ID)
		want, ok := m.contracts[r.ID]
		if !ok {
			if !errors.Is(err, contractstore.ErrNotFound) {
				t.Fatalf("%s: not deleted (%v)", r.ID, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		checkContract(t, got, want, true)
		page, err := b.TransactionList(ctx, &contractstore.TransactionListParams{Contract: r.ID, Limit: 10})
		if err != nil || len(page.Transactions) != 0 {
			t.Fatalf("%s: transactions left: %v", r.ID, err)
		}
	}
	// Every read agrees with the model after the reset.
	all, total := listAll(t, b, contractstore.ContractFilter{}, 1000, false)
	if len(all) != len(m.contracts) || *total != int64(len(m.contracts)) {
		t.Fatalf("%d contracts (total %d), want %d", len(all), *total, len(m.contracts))
	}
	want := m.payoutList(&contractstore.PayoutListParams{})
	page, err := b.PayoutList(ctx, &contractstore.PayoutListParams{Limit: 1000})
	if err != nil || len(page.Payouts) != len(want) {
		t.Fatalf("%d payouts, want %d (%v)", len(page.Payouts), len(want), err)
	}
	wl, err := b.WithdrawalList(ctx, &contractstore.WithdrawalListParams{Limit: 1000})
	if err != nil || !equalJSONOf(wl.Withdrawals, m.withdrawalList(nil, nil)) {
		t.Fatalf("withdrawals after the reset differ (%v)", err)
	}
	// The filters see the restored parties and tags.
	for _, f := range []contractstore.ContractFilter{{Tags: []string{"alpha"}}, {PartyAddress: []string{address(2)}}} {
		got, _ := listAll(t, b, f, 1000, false)
		if len(got) != len(m.list(&f)) {
			t.Fatalf("filter %+v: %d, want %d", f, len(got), len(m.list(&f)))
		}
	}
}

func testConflict(t *testing.T, b contractstore.Backend) {
	ctx := ctxOf(t)
	m, g := fillStore(t, b, 2)
	p := g.next(2, 2, 0)
	p.PrevSeq = m.head.Seq - 1
	if err := b.Commit(ctx, p); !errors.Is(err, contractstore.ErrConflict) {
		t.Fatalf("a commit from a stale cursor: %v", err)
	}
	h, err := b.HeadGet(ctx)
	if err != nil || h != m.head {
		t.Fatalf("head moved: %+v", h)
	}
	all, _ := listAll(t, b, contractstore.ContractFilter{}, 1000, false)
	if len(all) != len(m.contracts) {
		t.Fatalf("the refused commit wrote %d contracts", len(all)-len(m.contracts))
	}
}

// testConcurrentReads reads while batches commit: every read sees one
// snapshot, so no row is newer than the position the read reports, and a
// list's total matches the rows of the same snapshot.
func testConcurrentReads(t *testing.T, b contractstore.Backend) {
	ctx, cancel := context.WithCancel(ctxOf(t))
	defer cancel()
	m, g := fillStore(t, b, 2)
	var wg sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				page, err := b.ContractList(ctx, &contractstore.ContractListParams{Limit: 1000})
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				reads.Add(1)
				if int64(len(page.Contracts)) != *page.Total {
					errs <- errors.New("a list's total does not match its rows")
					return
				}
				for _, c := range page.Contracts {
					if c.LastSeq > page.At.Seq {
						errs <- errors.New("a row newer than the position its read reports")
						return
					}
					got, at, err := b.ContractGet(ctx, c.ID)
					if err != nil {
						if ctx.Err() == nil {
							errs <- err
						}
						return
					}
					if got.LastSeq > at.Seq {
						errs <- errors.New("a contract newer than the position its read reports")
						return
					}
				}
			}
		}()
	}
	for i := 0; i < 30 || reads.Load() < 20; i++ {
		p := g.next(2, 3, 1)
		if err := b.Commit(ctx, p); err != nil {
			t.Fatal(err)
		}
		m.apply(p)
		if i > 10000 {
			t.Fatal("the readers made no progress")
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
