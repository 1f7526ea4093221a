package query_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
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
