package contractstoretest

import (
	"context"
	"testing"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
)

// BenchmarkLists measures pages of 100 contract headers per filter over a
// store of n contracts (created in batches of 100; a third of them carry
// each of three tags, a seventh each of seven party addresses), each page
// starting at a random-looking place of the filter's list. A backend runs
// it from its own _test.go file:
//
//	func BenchmarkLists(b *testing.B) { contractstoretest.BenchmarkLists(b, store, 20000, nil) }
//
// settle, if not nil, runs once the store is filled (PostgreSQL: ANALYZE,
// as autovacuum would have done by then; without statistics the planner
// takes every filter for a rare one).
//
// The unfiltered page is the baseline: a filter whose page costs much more
// than it does not scale with the store. Each filter is measured three
// ways: the page alone; the page with its Total (Count) as paging through
// a list asks for it, counted once for the projection's state and then
// kept ("counted"); and, when forget is given (it drops the kept counts),
// counted at every page, as after every commit ("recount").
func BenchmarkLists(b *testing.B, store contractstore.Backend, n int, settle func(), forget func()) {
	ctx := context.Background()
	m := newModel()
	g := &gen{m: m}
	for g.n < n {
		p := g.next(min(100, n-g.n), 0, 0)
		if err := store.Commit(ctx, p); err != nil {
			b.Fatal(err)
		}
		m.apply(p)
	}
	if settle != nil {
		settle()
	}
	filters := []struct {
		name string
		f    contractstore.ContractFilter
	}{
		{"all", contractstore.ContractFilter{}},
		{"status", contractstore.ContractFilter{Status: contractstore.StatusOpen}},
		{"roleCurrency", contractstore.ContractFilter{RolesCurrency: [][]byte{currencies[1]}}},
		{"tag", contractstore.ContractFilter{Tags: []string{tagNames[0]}}},
		{"twoTags", contractstore.ContractFilter{Tags: []string{tagNames[0], tagNames[1]}}},
		{"tagAndStatus", contractstore.ContractFilter{Tags: []string{tagNames[1]}, Status: contractstore.StatusOpen}},
		{"partyAddress", contractstore.ContractFilter{PartyAddress: []string{address(3)}}},
		{"partyRole", contractstore.ContractFilter{PartyRole: []record.RoleRef{{Currency: currencies[2], Name: []byte(roleNames[2])}}}},
	}
	for _, fc := range filters {
		for _, mode := range []string{"page", "counted", "recount"} {
			if mode == "recount" && forget == nil {
				continue
			}
			name := fc.name
			if mode != "page" {
				name += "/" + mode
			}
			b.Run(name, func(b *testing.B) {
				// Start points spread over the first half of the store so
				// that every page is full.
				i := int64(0)
				rows := 0
				for b.Loop() {
					i++
					if mode == "recount" {
						forget()
					}
					after := (i * 7919) % int64(g.seq/2+1)
					page, err := store.ContractList(ctx, &contractstore.ContractListParams{Filter: fc.f, After: after, Limit: 100,
						Count: mode != "page"})
					if err != nil {
						b.Fatal(err)
					}
					if mode != "page" && page.Total == nil {
						b.Fatal("no total")
					}
					rows += len(page.Contracts)
				}
				b.ReportMetric(float64(rows)/float64(b.N), "rows/op")
			})
		}
	}
}
