package query_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query"
)

// keysOf lists the range values of a page's items.
func keysOf[T any](items []rtItem[T], key func(*T) string) []string {
	out := make([]string, len(items))
	for i := range items {
		out[i] = key(&items[i].Resource)
	}
	return out
}

// checkPaging pages through one list of the view in both orders with pages
// of 3 and compares with the list read in one page; then starts at an id,
// with an offset, and checks the answers against the whole list.
func checkPaging[T any](f *fixture, path, field string, key func(*T) string) []string {
	t := f.t
	t.Helper()
	all := keysOf(rtPages(f, path, field, field+";limit 10000", key), key) // newest first
	if len(all) < 4 {
		t.Fatalf("%s: only %d items to page through", path, len(all))
	}
	if dup := slices.Compact(slices.Sorted(slices.Values(all))); len(dup) != len(all) {
		t.Fatalf("%s: the list repeats items", path)
	}
	desc := keysOf(rtPages(f, path, field, field+";limit 3", key), key)
	if !slices.Equal(desc, all) {
		t.Fatalf("%s: pages of 3, newest first, differ from one page:\n%v\n%v", path, desc, all)
	}
	asc := keysOf(rtPages(f, path, field, field+";limit 3;order asc", key), key)
	rev := slices.Clone(all)
	slices.Reverse(rev)
	if !slices.Equal(asc, rev) {
		t.Fatalf("%s: pages of 3, oldest first, are not the reverse", path)
	}
	// The default range is the newest 100.
	def := f.rtGet(path, nil, http.StatusPartialContent)
	var page rtList[T]
	def.decode(t, &page)
	if want := all[:min(100, len(all))]; !slices.Equal(keysOf(page.Results, key), want) {
		t.Fatalf("%s: the default range is not the newest 100", path)
	}
	// A page short of the limit is the last and names no next one; a full
	// page names the next one even when it is empty (docs/query.md).
	if len(all) < 100 && def.header.Get("Next-Range") != "" {
		t.Fatalf("%s: Next-Range on the last page", path)
	}
	enc := func(k string) string { return strings.ReplaceAll(k, "#", "%23") }
	for _, c := range []struct {
		rng  string
		want []string
	}{
		{field + " " + enc(all[1]) + ";limit 2", all[1:3]},
		{field + " " + all[1] + ";limit 2", all[1:3]}, // the # unencoded
		{field + " " + enc(all[1]) + ";limit 2;offset 1", all[2:4]},
		{field + " " + enc(all[2]) + ";limit 2;order asc", []string{all[2], all[1]}},
		{field + " " + enc(all[0]) + ";limit 1;offset 1;order asc", nil},
		{field + ";limit 2;offset " + strconv.Itoa(len(all)-1), all[len(all)-1:]},
		{field + ";limit 0", nil},
		{field + " " + enc(all[len(all)-1]) + ";limit 5", all[len(all)-1:]},
	} {
		h := http.Header{"Range": {c.rng}}
		a := f.rtGet(path, h, http.StatusPartialContent)
		var p rtList[T]
		a.decode(t, &p)
		got := keysOf(p.Results, key)
		if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Fatalf("%s Range %q: %v, want %v", path, c.rng, got, c.want)
		}
	}
	// A full page names the next one: it starts at the last item and skips it.
	a := f.rtGet(path, http.Header{"Range": {field + " " + enc(all[1]) + ";limit 2"}}, http.StatusPartialContent)
	if got, want := a.header.Get("Next-Range"), field+" "+enc(all[2])+";limit 2;offset 1;order desc"; got != want {
		t.Fatalf("%s: Next-Range %q, want %q", path, got, want)
	}
	return all
}

// TestRuntimePaging pages through every list of the view, and through the
// contracts while new ones are created between two pages.
func TestRuntimePaging(t *testing.T) {
	for _, backend := range projectiontest.Backends {
		t.Run(backend, func(t *testing.T) {
			f := newFixture(t, backend, 21, 400, withRuntime)
			contracts := checkPaging(f, "/contracts", "contractId", contractKey)
			checkPaging(f, "/payouts", "payoutId", payoutKey)
			checkPaging(f, "/withdrawals", "withdrawalId", withdrawalKey)
			// The contract with the most steps.
			best, steps := "", 0
			for _, id := range contracts {
				n := len(rtPages(f, "/contracts/"+pathEscape(id)+"/transactions", "transactionId", "", txKey))
				if n > steps {
					best, steps = id, n
				}
			}
			if steps >= 4 {
				checkPaging(f, "/contracts/"+pathEscape(best)+"/transactions", "transactionId", txKey)
			}

			// Oldest first, a page at a time, while the chain grows: the pages
			// continue where they stopped and end with the new contracts.
			first := f.rtGet("/contracts", http.Header{"Range": {"contractId;limit 3;order asc"}}, http.StatusPartialContent)
			var seen []string
			var p rtList[rtContract]
			first.decode(t, &p)
			seen = append(seen, keysOf(p.Results, contractKey)...)
			next := first.header.Get("Next-Range")
			f.p.Advance(200)
			f.p.Sync()
			for next != "" {
				a := f.rtGet("/contracts", http.Header{"Range": {next}}, http.StatusPartialContent)
				var p rtList[rtContract]
				a.decode(t, &p)
				seen = append(seen, keysOf(p.Results, contractKey)...)
				next = a.header.Get("Next-Range")
			}
			now := keysOf(rtPages(f, "/contracts", "contractId", "contractId;limit 10000;order asc", contractKey), contractKey)
			if len(now) <= len(contracts) {
				t.Fatal("no contract was created between the pages")
			}
			// Rollbacks may remove contracts listed on the first page; every
			// contract that exists now was seen, once, in order.
			var kept []string
			for _, id := range seen {
				if slices.Contains(now, id) {
					kept = append(kept, id)
				}
			}
			if !slices.Equal(kept, now) {
				t.Fatalf("paging while contracts were created:\nseen %v\n now %v", seen, now)
			}
		})
	}
}

// countingReader counts the rows the view reads from the contract store.
type countingReader struct {
	query.ContractReader
	mu      sync.Mutex
	rows    int // rows the list reads returned
	lookups int // single-resource reads
}

func (c *countingReader) reset() {
	c.mu.Lock()
	c.rows, c.lookups = 0, 0
	c.mu.Unlock()
}

func (c *countingReader) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rows, c.lookups
}

func (c *countingReader) add(rows, lookups int) {
	c.mu.Lock()
	c.rows += rows
	c.lookups += lookups
	c.mu.Unlock()
}

// listed reads a page with list and counts its rows.
func listed[P, Page any](ctx context.Context, c *countingReader, list func(context.Context, P) (Page, error), p P, rows func(Page) int) (Page, error) {
	page, err := list(ctx, p)
	if err == nil {
		c.add(rows(page), 0)
	}
	return page, err
}

func (c *countingReader) ContractList(ctx context.Context, p *contractstore.ContractListParams) (*contractstore.ContractPage, error) {
	return listed(ctx, c, c.ContractReader.ContractList, p, func(page *contractstore.ContractPage) int { return len(page.Contracts) })
}

func (c *countingReader) TransactionList(ctx context.Context, p *contractstore.TransactionListParams) (*contractstore.TransactionPage, error) {
	return listed(ctx, c, c.ContractReader.TransactionList, p, func(page *contractstore.TransactionPage) int { return len(page.Transactions) })
}

func (c *countingReader) PayoutList(ctx context.Context, p *contractstore.PayoutListParams) (*contractstore.PayoutPage, error) {
	return listed(ctx, c, c.ContractReader.PayoutList, p, func(page *contractstore.PayoutPage) int { return len(page.Payouts) })
}

func (c *countingReader) WithdrawalList(ctx context.Context, p *contractstore.WithdrawalListParams) (*contractstore.WithdrawalPage, error) {
	return listed(ctx, c, c.ContractReader.WithdrawalList, p, func(page *contractstore.WithdrawalPage) int { return len(page.Withdrawals) })
}

func (c *countingReader) ContractGet(ctx context.Context, id chain.TxOutRef) (*contractstore.Contract, contractstore.Position, error) {
	c.add(0, 1)
	return c.ContractReader.ContractGet(ctx, id)
}

func (c *countingReader) TransactionGet(ctx context.Context, contract chain.TxOutRef, tx chain.Hash32) (*contractstore.Transaction, contractstore.Position, error) {
	c.add(0, 1)
	return c.ContractReader.TransactionGet(ctx, contract, tx)
}

func (c *countingReader) PayoutGet(ctx context.Context, id chain.TxOutRef) (*contractstore.Payout, contractstore.Position, error) {
	c.add(0, 1)
	return c.ContractReader.PayoutGet(ctx, id)
}

func (c *countingReader) WithdrawalGet(ctx context.Context, tx chain.Hash32) (*contractstore.Withdrawal, contractstore.Position, error) {
	c.add(0, 1)
	return c.ContractReader.WithdrawalGet(ctx, tx)
}

// TestRuntimePagingCostIsFlat: following Next-Range through a whole list,
// in both orders, every page reads the same few rows from the store (its
// limit and the start it skips) and looks its start id up once, whether it
// is the first page or the last: keyset paging, not an offset from the
// start of the list.
func TestRuntimePagingCostIsFlat(t *testing.T) {
	for _, backend := range projectiontest.Backends {
		t.Run(backend, func(t *testing.T) {
			var cr *countingReader
			f := newFixture(t, backend, 28, 600, func(c *query.Config) {
				withRuntime(c)
				cr = &countingReader{ContractReader: c.Contracts}
				c.Contracts = cr
			})
			contracts := keysOf(rtPages(f, "/contracts", "contractId", "contractId;limit 10000", contractKey), contractKey)
			best, steps := "", 0
			for _, id := range contracts {
				if n := len(rtPages(f, "/contracts/"+pathEscape(id)+"/transactions", "transactionId", "", txKey)); n > steps {
					best, steps = id, n
				}
			}
			const limit = 3
			for _, l := range []struct{ path, field string }{
				{"/contracts", "contractId"},
				{"/payouts", "payoutId"},
				{"/withdrawals", "withdrawalId"},
				{"/contracts/" + pathEscape(best) + "/transactions", "transactionId"},
			} {
				for _, order := range []string{"desc", "asc"} {
					rng := l.field + ";limit " + strconv.Itoa(limit) + ";order " + order
					pagesRead := 0
					for rng != "" {
						cr.reset()
						a := f.rtGet(l.path, http.Header{"Range": {rng}}, http.StatusPartialContent)
						rows, lookups := cr.counts()
						// A page from a start id reads the start (skipped: offset 1)
						// and the page; the first page, the page only. The
						// transactions' contract is looked up to find the list.
						maxLookups := 0
						if strings.Contains(rng, l.field+" ") {
							maxLookups = 1
						}
						if rows > limit+1 || lookups > maxLookups {
							t.Fatalf("%s page %d (Range %q): %d rows and %d lookups read for a page of %d", l.path, pagesRead, rng, rows, lookups, limit)
						}
						pagesRead++
						rng = a.header.Get("Next-Range")
					}
					if pagesRead < 4 {
						t.Fatalf("%s: only %d pages: the list is too short to show anything", l.path, pagesRead)
					}
				}
			}
		})
	}
}
