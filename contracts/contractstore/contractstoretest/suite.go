package contractstoretest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
)

// Open returns a new, empty, initialised backend; the suite closes it.
type Open func(t *testing.T) contractstore.Backend

// Run runs every conformance test against backends made by open.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(*testing.T, contractstore.Backend)
	}{
		{"Empty", testEmpty},
		{"Contracts", testContracts},
		{"Filters", testFilters},
		{"Paging", testPaging},
		{"Counts", testCounts},
		{"Sources", testSources},
		{"Transactions", testTransactions},
		{"Payouts", testPayouts},
		{"Withdrawals", testWithdrawals},
		{"Reset", testReset},
		{"Conflict", testConflict},
		{"ConcurrentReads", testConcurrentReads},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			defer b.Close()
			tc.fn(t, b)
		})
	}
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fill commits rounds generated batches and returns the model.
func fillStore(t *testing.T, b contractstore.Backend, rounds int) (*model, *gen) {
	t.Helper()
	m := newModel()
	g := &gen{m: m}
	for i := range rounds {
		p := g.next(3, 4+i%3, 1)
		if err := b.Commit(ctxOf(t), p); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		m.apply(p)
	}
	return m, g
}

func testEmpty(t *testing.T, b contractstore.Backend) {
	ctx := ctxOf(t)
	if err := b.Init(ctx); err != nil {
		t.Fatalf("a second Init: %v", err)
	}
	if err := b.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := b.HeadGet(ctx)
	if err != nil || h.Seq != 0 || h.Contracts != 0 {
		t.Fatalf("head %+v, %v", h, err)
	}
	id := chain.TxOutRef{TxID: hashOf('x', 1)}
	if _, at, err := b.ContractGet(ctx, id); !errors.Is(err, contractstore.ErrNotFound) || at.Seq != 0 {
		t.Fatalf("get: %v at %+v", err, at)
	}
	page, err := b.ContractList(ctx, &contractstore.ContractListParams{Limit: 10})
	if err != nil || len(page.Contracts) != 0 || page.More || page.Total == nil || *page.Total != 0 {
		t.Fatalf("list: %+v, %v", page, err)
	}
	if _, err := b.TransactionList(ctx, &contractstore.TransactionListParams{Contract: id, Limit: 10}); !errors.Is(err, contractstore.ErrNotFound) {
		t.Fatalf("transactions of an unknown contract: %v", err)
	}
	if _, _, err := b.TransactionGet(ctx, id, id.TxID); !errors.Is(err, contractstore.ErrNotFound) {
		t.Fatalf("transaction: %v", err)
	}
	if _, _, err := b.TransactionOfTx(ctx, id.TxID); !errors.Is(err, contractstore.ErrNotFound) {
		t.Fatalf("transaction by its id: %v", err)
	}
	if _, _, err := b.PayoutGet(ctx, id); !errors.Is(err, contractstore.ErrNotFound) {
		t.Fatalf("payout: %v", err)
	}
	if _, _, err := b.WithdrawalGet(ctx, id.TxID); !errors.Is(err, contractstore.ErrNotFound) {
		t.Fatalf("withdrawal: %v", err)
	}
	if refs, err := b.ContractsAfterSlot(ctx, 0); err != nil || len(refs) != 0 {
		t.Fatalf("after slot: %v %v", refs, err)
	}
}

func testContracts(t *testing.T, b contractstore.Backend) {
	ctx := ctxOf(t)
	m, _ := fillStore(t, b, 6)
	h, err := b.HeadGet(ctx)
	if err != nil || h != m.head {
		t.Fatalf("head %+v, want %+v (%v)", h, m.head, err)
	}
	for id, want := range m.contracts {
		got, at, err := b.ContractGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if at != m.head.Position {
			t.Fatalf("position %+v, want %+v", at, m.head.Position)
		}
		checkContract(t, got, want, true)
	}
	// ContractsAfterSlot: every contract changed after the slot.
	slot := m.head.Block.Slot / 2
	refs, err := b.ContractsAfterSlot(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	var want []chain.TxOutRef
	for id, c := range m.contracts {
		if c.LastBlock.Slot > slot {
			want = append(want, id)
		}
	}
	var got []chain.TxOutRef
	for _, r := range refs {
		got = append(got, r.ID)
		if r.Open != (m.contracts[r.ID].Status == contractstore.StatusOpen) {
			t.Fatalf("%s: open %v", r.ID, r.Open)
		}
	}
	slices.SortFunc(got, chain.TxOutRef.Compare)
	slices.SortFunc(want, chain.TxOutRef.Compare)
	if !slices.Equal(got, want) {
		t.Fatalf("after slot %d: %d contracts, want %d", slot, len(got), len(want))
	}
}

// checkContract compares a read contract with the model.
func checkContract(t *testing.T, got, want *contractstore.Contract, body bool) {
	t.Helper()
	g, w := *got, *want
	gb, wb := g.Body, w.Body
	g.Body, w.Body = nil, nil
	if !jsonEqual(g.Tags, w.Tags) || !jsonEqual(g.Metadata, w.Metadata) {
		t.Fatalf("%s: tags %s metadata %s, want %s %s", w.ID, g.Tags, g.Metadata, w.Tags, w.Metadata)
	}
	g.Tags, w.Tags, g.Metadata, w.Metadata = nil, nil, nil, nil
	if !bytes.Equal(g.RolesCurrency, w.RolesCurrency) {
		t.Fatalf("%s: roles currency %x, want %x", w.ID, g.RolesCurrency, w.RolesCurrency)
	}
	g.RolesCurrency, w.RolesCurrency = nil, nil
	if !equalJSONOf(g, w) {
		t.Fatalf("%s: header\n got %+v\nwant %+v", w.ID, g, w)
	}
	if !body {
		if gb != nil {
			t.Fatalf("%s: a list returned a body", w.ID)
		}
		return
	}
	if gb == nil || !equalJSONOf(gb, wb) {
		gj, _ := json.Marshal(gb)
		wj, _ := json.Marshal(wb)
		t.Fatalf("%s: body\n got %s\nwant %s", w.ID, gj, wj)
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return equalJSONOf(x, y)
}

func equalJSONOf(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// modelList is the model's answer to a contract filter, in creation order.
func (m *model) list(f *contractstore.ContractFilter) []*contractstore.Contract {
	var out []*contractstore.Contract
	for id, c := range m.contracts {
		if f.Status != "" && c.Status != f.Status {
			continue
		}
		if len(f.Contracts) > 0 && !slices.Contains(f.Contracts, c.ID) {
			continue
		}
		if len(f.RolesCurrency) > 0 && !slices.ContainsFunc(f.RolesCurrency, func(rc []byte) bool { return bytes.Equal(rc, c.RolesCurrency) }) {
			continue
		}
		if len(f.Tags) > 0 && !slices.ContainsFunc(f.Tags, func(tag string) bool { return slices.Contains(m.tags[id], tag) }) {
			continue
		}
		if len(f.PartyAddress) > 0 || len(f.PartyRole) > 0 {
			match := slices.ContainsFunc(m.parties[id], func(p record.Party) bool {
				if p.Address != "" {
					return slices.Contains(f.PartyAddress, p.Address)
				}
				return slices.ContainsFunc(f.PartyRole, func(r record.RoleRef) bool {
					return bytes.Equal(r.Currency, p.RoleCurrency) && bytes.Equal(r.Name, p.Role)
				})
			})
			if !match {
				continue
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *contractstore.Contract) int { return int(a.Seq - b.Seq) })
	return out
}

// listAll pages through a filter and returns every contract.
func listAll(t *testing.T, b contractstore.Backend, f contractstore.ContractFilter, limit int, desc bool) ([]contractstore.Contract, *int64) {
	t.Helper()
	var out []contractstore.Contract
	var after int64
	var total *int64
	for pages := 0; ; pages++ {
		page, err := b.ContractList(ctxOf(t), &contractstore.ContractListParams{Filter: f, After: after, Limit: limit, Descending: desc})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Contracts) > limit {
			t.Fatalf("page of %d, limit %d", len(page.Contracts), limit)
		}
		total = page.Total
		out = append(out, page.Contracts...)
		if !page.More {
			return out, total
		}
		if len(page.Contracts) == 0 || pages > 10000 {
			t.Fatal("a page with more but no contracts")
		}
		after = page.Contracts[len(page.Contracts)-1].Seq
	}
}

func testFilters(t *testing.T, b contractstore.Backend) {
	m, _ := fillStore(t, b, 8)
	roles := func(pairs ...int) []record.RoleRef {
		var out []record.RoleRef
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, record.RoleRef{Currency: currencies[pairs[i]], Name: []byte(roleNames[pairs[i+1]])})
		}
		return out
	}
	ids := m.list(&contractstore.ContractFilter{})
	some := []chain.TxOutRef{ids[0].ID, ids[len(ids)/2].ID, ids[len(ids)-1].ID}
	filters := []contractstore.ContractFilter{
		{},
		{Contracts: some},
		{Contracts: some[:1], Status: contractstore.StatusOpen},
		{Contracts: some, Tags: []string{"alpha", "beta"}},
		{Contracts: some, PartyAddress: []string{address(1), address(2)}, PartyRole: roles(1, 1)},
		{Contracts: []chain.TxOutRef{{Index: 9}}},
		{Status: contractstore.StatusOpen},
		{Status: contractstore.StatusClosed},
		{RolesCurrency: [][]byte{currencies[1]}},
		{RolesCurrency: [][]byte{currencies[0], currencies[2]}},
		{Tags: []string{"alpha"}},
		{Tags: []string{"beta", "gamma"}},
		{Tags: []string{"nope"}},
		{PartyAddress: []string{address(3)}},
		{PartyAddress: []string{address(1), address(2)}},
		{PartyRole: roles(1, 1)},
		{PartyRole: roles(2, 2, 0, 0)},
		{PartyAddress: []string{address(4)}, PartyRole: roles(1, 1)},
		{RolesCurrency: [][]byte{currencies[1]}, Tags: []string{"beta"}, PartyAddress: []string{address(1)}, PartyRole: roles(1, 1)},
		{RolesCurrency: [][]byte{currencies[2]}, Status: contractstore.StatusOpen, Tags: []string{"alpha", "gamma"}},
		{Tags: []string{"alpha", "beta", "alpha"}},
		{PartyAddress: []string{address(1), address(2), address(1)}, PartyRole: roles(1, 1, 2, 2), Status: contractstore.StatusOpen},
		{Tags: []string{"gamma"}, PartyAddress: []string{address(5)}},
	}
	for i, f := range filters {
		want := m.list(&f)
		got, total := listAll(t, b, f, 1000, false)
		if len(got) != len(want) {
			t.Fatalf("filter %d %+v: %d contracts, want %d", i, f, len(got), len(want))
		}
		for k := range got {
			checkContract(t, &got[k], want[k], false)
		}
		cheap := len(f.Contracts) == 0 && len(f.RolesCurrency) == 0 && len(f.Tags) == 0 && len(f.PartyAddress) == 0 && len(f.PartyRole) == 0
		if cheap != (total != nil) || (total != nil && *total != int64(len(want))) {
			t.Fatalf("filter %d: total %v, want %d (cheap %v)", i, total, len(want), cheap)
		}
		// Small pages in both directions: a contract found through two of
		// the filter's values appears once, and pages neither skip nor repeat.
		for _, desc := range []bool{false, true} {
			paged, _ := listAll(t, b, f, 3, desc)
			if desc {
				slices.Reverse(paged)
			}
			if len(paged) != len(want) {
				t.Fatalf("filter %d, pages of 3 (descending %v): %d contracts, want %d", i, desc, len(paged), len(want))
			}
			for k := range paged {
				if paged[k].ID != want[k].ID {
					t.Fatalf("filter %d, pages of 3 (descending %v): contract %d is %s, want %s", i, desc, k, paged[k].ID, want[k].ID)
				}
			}
		}
	}
}

func testPaging(t *testing.T, b contractstore.Backend) {
	m, _ := fillStore(t, b, 10)
	want := m.list(&contractstore.ContractFilter{})
	for _, limit := range []int{1, 4, 7, 1000} {
		got, _ := listAll(t, b, contractstore.ContractFilter{}, limit, false)
		if len(got) != len(want) {
			t.Fatalf("limit %d: %d contracts, want %d", limit, len(got), len(want))
		}
		for k := range got {
			if got[k].ID != want[k].ID {
				t.Fatalf("limit %d: contract %d is %s, want %s", limit, k, got[k].ID, want[k].ID)
			}
		}
		desc, _ := listAll(t, b, contractstore.ContractFilter{Tags: []string{"alpha", "beta"}}, limit, true)
		wantDesc := m.list(&contractstore.ContractFilter{Tags: []string{"alpha", "beta"}})
		slices.Reverse(wantDesc)
		if len(desc) != len(wantDesc) {
			t.Fatalf("descending, limit %d: %d contracts, want %d", limit, len(desc), len(wantDesc))
		}
		for k := range desc {
			if desc[k].ID != wantDesc[k].ID {
				t.Fatalf("descending, limit %d: contract %d is %s", limit, k, desc[k].ID)
			}
		}
	}
	page, err := b.ContractList(ctxOf(t), &contractstore.ContractListParams{Limit: 0})
	if err != nil || len(page.Contracts) != min(len(want), contractstore.MaxLimit) {
		t.Fatalf("limit 0: %d contracts, %v", len(page.Contracts), err)
	}
	// From a contract: it is the first of the page, in both orders, with or
	// without a filter that keeps it; one that does not exist starts none.
	tagged := contractstore.ContractFilter{Tags: []string{"alpha", "beta"}}
	inTagged := m.list(&tagged)
	for _, k := range []int{0, len(inTagged) / 2, len(inTagged) - 1} {
		from := inTagged[k].ID
		for _, f := range []contractstore.ContractFilter{{}, tagged} {
			list := m.list(&f)
			i := slices.IndexFunc(list, func(c *contractstore.Contract) bool { return c.ID == from })
			for _, desc := range []bool{false, true} {
				page, err := b.ContractList(ctxOf(t), &contractstore.ContractListParams{Filter: f, From: &from, Limit: 3, Descending: desc})
				if err != nil {
					t.Fatal(err)
				}
				var wantIDs []chain.TxOutRef
				if desc {
					for j := i; j >= 0 && len(wantIDs) < 3; j-- {
						wantIDs = append(wantIDs, list[j].ID)
					}
				} else {
					for j := i; j < len(list) && len(wantIDs) < 3; j++ {
						wantIDs = append(wantIDs, list[j].ID)
					}
				}
				var got []chain.TxOutRef
				for _, c := range page.Contracts {
					got = append(got, c.ID)
				}
				if !slices.Equal(got, wantIDs) {
					t.Fatalf("from %s (filter %+v, descending %v): %v, want %v", from, f, desc, got, wantIDs)
				}
			}
		}
	}
	missing := chain.TxOutRef{TxID: hashOf('x', 7)}
	if page, err := b.ContractList(ctxOf(t), &contractstore.ContractListParams{From: &missing, Limit: 3}); err != nil || len(page.Contracts) != 0 {
		t.Fatalf("from a contract that does not exist: %d contracts, %v", len(page.Contracts), err)
	}
}
