package contractstoretest

import (
	"strconv"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
)

// testCounts checks every list's Total when the params ask for Count: the
// model's count of what the list selects, whatever the page (the first or
// one further on, any limit), and again after each further commit, which
// changes the counts (a count kept for an older state would show).
func testCounts(t *testing.T, b contractstore.Backend) {
	m, g := fillStore(t, b, 6)
	var before int
	for round := range 3 {
		if round > 0 {
			p := g.next(2, 4, 1)
			if err := b.Commit(ctxOf(t), p); err != nil {
				t.Fatal(err)
			}
			m.apply(p)
		}
		// The first list counted after a commit is one whose count the
		// commit changed: a count kept from before would be wrong.
		n := len(m.list(&firstCounted))
		if round > 0 && n == before {
			t.Fatalf("the commit did not change the count of %+v: the test checks nothing", firstCounted)
		}
		before = n
		checkContractCounts(t, b, m)
		checkRowCounts(t, b, m)
	}
}

// firstCounted is the first filter checkContractCounts counts.
var firstCounted = contractstore.ContractFilter{Tags: []string{"alpha", "beta"}}

func checkContractCounts(t *testing.T, b contractstore.Backend, m *model) {
	ids := m.list(&contractstore.ContractFilter{})
	some := []chain.TxOutRef{ids[0].ID, ids[len(ids)-1].ID}
	role := record.RoleRef{Currency: currencies[1], Name: []byte(roleNames[1])}
	for i, f := range []contractstore.ContractFilter{
		firstCounted, {}, {Status: contractstore.StatusOpen}, {Contracts: some}, {RolesCurrency: [][]byte{currencies[1]}},
		{Tags: []string{"alpha"}}, {Tags: []string{"alpha", "beta"}}, {PartyAddress: []string{address(1)}},
		{PartyAddress: []string{address(1), address(2)}, PartyRole: []record.RoleRef{role}},
		{RolesCurrency: [][]byte{currencies[2]}, Tags: []string{"beta", "gamma"}, Status: contractstore.StatusClosed},
		{Tags: []string{"nope"}},
	} {
		want := int64(len(m.list(&f)))
		for _, p := range []contractstore.ContractListParams{
			{Filter: f, Limit: 1, Count: true},
			{Filter: f, Limit: 1000, Count: true, Descending: true},
			{Filter: f, Limit: 2, Count: true, After: ids[len(ids)/2].Seq},
		} {
			page, err := b.ContractList(ctxOf(t), &p)
			if err != nil {
				t.Fatal(err)
			}
			if page.Total == nil || *page.Total != want || page.At != m.head.Position {
				t.Fatalf("filter %d %+v: total %s at seq %d, want %d at seq %d", i, f, totalText(page.Total), page.At.Seq, want, m.head.Seq)
			}
		}
	}
}

func checkRowCounts(t *testing.T, b contractstore.Backend, m *model) {
	ctx := ctxOf(t)
	for id := range m.contracts {
		for _, applied := range []bool{false, true} {
			var want int64
			for _, tx := range m.txs[id] {
				if !applied || tx.Kind == contractstore.TxApplied {
					want++
				}
			}
			page, err := b.TransactionList(ctx, &contractstore.TransactionListParams{Contract: id, AppliedOnly: applied, Limit: 1, Count: true})
			if err != nil {
				t.Fatal(err)
			}
			if page.Total == nil || *page.Total != want {
				t.Fatalf("steps of %s (applied only %v): total %s, want %d", id, applied, totalText(page.Total), want)
			}
		}
	}
	var some []chain.TxOutRef
	for id := range m.contracts {
		if len(some) < 2 {
			some = append(some, id)
		}
	}
	for i, p := range []contractstore.PayoutListParams{
		{}, {RolesOnly: true}, {Status: contractstore.PayoutAvailable}, {Contracts: some},
		{Roles: []record.RoleRef{{Currency: currencies[1], Name: []byte(roleNames[1])}}, Status: contractstore.PayoutWithdrawn},
	} {
		want := int64(len(m.payoutList(&p)))
		p.Limit, p.Count = 1, true
		page, err := b.PayoutList(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		if page.Total == nil || *page.Total != want {
			t.Fatalf("payouts %d: total %s, want %d", i, totalText(page.Total), want)
		}
	}
	for i, rcs := range [][][]byte{nil, {currencies[1]}, {currencies[0], currencies[2]}} {
		want := int64(len(m.withdrawalList(nil, rcs)))
		for _, desc := range []bool{false, true} {
			page, err := b.WithdrawalList(ctx, &contractstore.WithdrawalListParams{RolesCurrency: rcs, Limit: 1, Count: true, Descending: desc})
			if err != nil {
				t.Fatal(err)
			}
			if page.Total == nil || *page.Total != want {
				t.Fatalf("withdrawals %d: total %s, want %d", i, totalText(page.Total), want)
			}
		}
	}
}

// totalText shows a page's total.
func totalText(n *int64) string {
	if n == nil {
		return "none"
	}
	return strconv.FormatInt(*n, 10)
}
