package contractstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
)

// BenchmarkLists measures pages of 100 contract headers per filter over a
// store of n contracts (created in batches of 100; a third of them carry
// each of three tags, a seventh each of seven party addresses), each page
// starting at a random-looking place of the filter's list. A backend runs
// it from its own _test.go file:
//
//	func BenchmarkLists(b *testing.B) { contractstoretest.BenchmarkLists(b, store, 20000, nil, store.Counts.Forget) }
//
// settle, if not nil, runs once the store is filled (PostgreSQL: ANALYZE,
// as autovacuum would have done by then; without statistics the planner
// takes every filter for a rare one).
//
// The unfiltered page is the baseline: a filter whose page costs much more
// than it does not scale with the store. With forget (it drops the kept
// counts) each filter is also measured with its Total (Count), paired with
// the page alone in every iteration so that both see the same machine: the
// page counted afresh ("recount", as after every commit) and with the count
// kept for the state ("kept", as paging through a list between commits);
// each reported as ms/page and as a ratio to the page alone.
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
		b.Run(fc.name, func(b *testing.B) {
			// Start points spread over the first half of the store so that
			// every page is full.
			i := int64(0)
			rows := 0
			var page, recount, kept time.Duration
			for b.Loop() {
				i++
				start := time.Now()
				after := (i * 7919) % int64(g.seq/2+1)
				p, err := store.ContractList(ctx, &contractstore.ContractListParams{Filter: fc.f, After: after, Limit: 100})
				if err != nil {
					b.Fatal(err)
				}
				rows += len(p.Contracts)
				page += time.Since(start)
				if forget == nil {
					continue
				}
				for _, keep := range []bool{false, true} {
					if !keep {
						forget()
					}
					start := time.Now()
					p, err := store.ContractList(ctx, &contractstore.ContractListParams{Filter: fc.f, After: after, Limit: 100, Count: true})
					if err != nil || p.Total == nil {
						b.Fatalf("a counted page: %v (total %v)", err, p)
					}
					if keep {
						kept += time.Since(start)
					} else {
						recount += time.Since(start)
					}
				}
			}
			b.ReportMetric(float64(rows)/float64(b.N), "rows/op")
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
			b.ReportMetric(ms(page), "ms/page")
			if forget != nil {
				b.ReportMetric(ms(recount), "ms/recount")
				b.ReportMetric(ms(kept), "ms/kept")
				b.ReportMetric(float64(recount)/float64(page), "recount/page")
				b.ReportMetric(float64(kept)/float64(page), "kept/page")
			}
		})
	}
}
