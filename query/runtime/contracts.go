package runtime

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// collect reads a list from its start through fetch (one backend page of
// at most limit items a call, the cursor kept by the caller) until want
// items or the end of the list. It reads once at least, also for none
// (a page of no items still has its position and count).
func collect[T any](want int, fetch func(limit int) (items []T, more bool, err error)) ([]T, error) {
	var out []T
	for {
		items, more, err := fetch(max(1, min(want-len(out), contractstore.MaxLimit)))
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = items // the first page as read: most ranges need no second
		} else {
			out = append(out, items...)
		}
		if !more || len(items) == 0 || len(out) >= want {
			break
		}
	}
	return out[:min(len(out), want)], nil
}

// readRange reads what a range selects from its list: fetch reads one
// backend page of at most limit items, continuing after the page before;
// when the range names a start, the first item read must be it (isStart),
// else the answer is 416 with missing.
func readRange[T any](pr *pageRange, fetch func(limit int) ([]T, bool, error), isStart func(*T) bool, missing string) ([]T, error) {
	items, err := collect(reads(pr), fetch)
	if err == nil && pr.hasVal && (len(items) == 0 || !isStart(&items[0])) {
		err = &rangeError{missing}
	}
	if err != nil {
		return nil, err
	}
	return window(items, pr), nil
}

// window drops a range's offset from the items read from its start, and
// cuts them to its limit.
func window[T any](items []T, pr *pageRange) []T {
	if pr.want() == 0 || pr.offset >= len(items) {
		return items[:0]
	}
	items = items[pr.offset:]
	if len(items) > pr.limit {
		items = items[:pr.limit]
	}
	return items
}

// reads is how many items a range reads from its start: at least one when
// it names a start, whose presence the answer checks.
func reads(pr *pageRange) int {
	if pr.hasVal {
		return max(pr.want(), 1)
	}
	return pr.want()
}

// item is a resource of a list and its links.
type item struct {
	Resource any `json:"resource"`
	Links    any `json:"links"`
}

type list struct {
	Results []item `json:"results"`
}

// page answers a page: 206 with the paging headers, as servant does for
// every paged answer, and Total-Count when total is known.
func page(pr *pageRange, at contractstore.Position, sp span, items []item, total *int64) (api.Answer, error) {
	if items == nil {
		items = []item{}
	}
	a := pageAnswer(pr, at, sp, total)
	var err error
	a.Body, err = api.EncodeJSON(list{Results: items})
	return a, err
}

// pageAnswer is a page's answer without its body.
func pageAnswer(pr *pageRange, at contractstore.Position, sp span, total *int64) api.Answer {
	h := make(http.Header, 5)
	setPageHeaders(h, pr, sp)
	if total != nil {
		h.Set(HeaderTotalCount, strconv.FormatInt(*total, 10))
	}
	return api.Answer{At: at, Status: http.StatusPartialContent, ContentType: jsonContentType, Header: h}
}

// one answers a resource.
func one(at contractstore.Position, v any) (api.Answer, error) {
	body, err := api.EncodeJSON(v)
	return api.Answer{At: at, ContentType: jsonContentType, Body: body}, err
}

// ranged is a list's Range: the range and, when it names one, the item
// it starts from.
type ranged[K any] struct {
	pr    *pageRange
	start K
}

// parseRanged reads the Range header of a list whose items the range names
// by field (the item called what in errors), read by start.
func parseRanged[K any](h http.Header, field, what string, start func(*pageRange, string) (K, error)) (ranged[K], error) {
	var rg ranged[K]
	var err error
	if rg.pr, err = parseRange(h, field); err == nil && rg.pr.hasVal {
		rg.start, err = start(rg.pr, what)
	}
	return rg, err
}

// listRequest is a list request: what selects the list (its filter,
// params or contract) and its Range.
type listRequest[S, K any] struct {
	sel S
	ranged[K]
}

// rangedList answers a list: sel reads what selects it, its Range names
// the items by field (what in errors, read by start), read answers it.
func rangedList[S, K any](v *View, sel func(r *http.Request, q *api.Query) (S, error), field, what string,
	start func(*pageRange, string) (K, error), read func(ctx context.Context, req *listRequest[S, K]) (api.Answer, error)) http.HandlerFunc {
	return handle(v, func(r *http.Request, q *api.Query) (*listRequest[S, K], error) {
		s, err := sel(r, q)
		if err != nil {
			return nil, err
		}
		req := &listRequest[S, K]{sel: s}
		req.ranged, err = parseRanged(r.Header, field, what, start)
		return req, err
	}, read)
}

// rangeStart reads the item a range starts from with parse (want says
// what it takes) and writes the range's value as the item's own text.
func rangeStart[K fmt.Stringer](pr *pageRange, what, want string, parse func(string) (K, error)) (K, error) {
	k, err := parse(pr.value)
	if err != nil {
		return k, &rangeError{fmt.Sprintf("Invalid range value: %s %q: want %s", what, api.Clip(pr.value), want)}
	}
	pr.value = k.String()
	return k, nil
}

func rangeStartRef(pr *pageRange, what string) (chain.TxOutRef, error) {
	return rangeStart(pr, what, "TXID#INDEX", chain.ParseTxOutRef)
}

func rangeStartTx(pr *pageRange, what string) (chain.Hash32, error) {
	return rangeStart(pr, what, "64 hex digits", chain.ParseHash32)
}

// pathRef reads an output reference of a view path.
func pathRef(r *http.Request, name, what, code string) (chain.TxOutRef, error) {
	id, err := chain.ParseTxOutRef(r.PathValue(name))
	if err != nil {
		return id, invalid(code, fmt.Sprintf("Invalid %s value %q: want TXID#INDEX (# is %%23 in a URL)", what, api.Clip(r.PathValue(name))))
	}
	return id, nil
}

// pathTx reads a transaction id of a view path.
func pathTx(r *http.Request, name, what string) (chain.Hash32, error) {
	h, err := chain.ParseHash32(r.PathValue(name))
	if err != nil {
		return h, invalid("bad_tx_id", fmt.Sprintf("Invalid %s value %q: want 64 hex digits", what, api.Clip(r.PathValue(name))))
	}
	return h, nil
}

// contractListRequest is a contract list's filter and range.
type contractListRequest = listRequest[contractstore.ContractFilter, chain.TxOutRef]

func (v *View) contractList() http.HandlerFunc {
	return rangedList(v, func(r *http.Request, q *api.Query) (contractstore.ContractFilter, error) {
		return api.ContractFilter(q, false, false)
	}, "contractId", "contract id", rangeStartRef, v.readContracts)
}

// readContracts reads a contract page: from the Range's start contract
// when it names one (its place is found in the page's statement: no lookup
// before it), through the fast writer.
func (v *View) readContracts(ctx context.Context, req *contractListRequest) (api.Answer, error) {
	pr := req.pr
	p := &contractstore.ContractListParams{Filter: req.sel, Descending: pr.desc, Count: true}
	if pr.hasVal {
		p.From = &req.start
	}
	var first firstRead
	items, err := readRange(pr, func(limit int) ([]contractstore.Contract, bool, error) {
		p.Limit = limit
		page, err := v.env.Contracts.ContractList(ctx, p)
		if err != nil {
			return nil, false, err
		}
		p.From = nil
		return nextPage(&first, &p.Count, page.Contracts, page.More, page.Total, page.At,
			func(last *contractstore.Contract) { p.After = last.Seq })
	}, func(c *contractstore.Contract) bool { return c.ID == req.start }, "Initial contract ID not found")
	if err != nil {
		return api.Answer{}, err
	}
	bp, release := api.Buffer()
	*bp = appendContractList(*bp, items)
	a := pageAnswer(pr, first.at, spanOf(items, func(c *contractstore.Contract) string { return c.ID.String() }), first.total)
	a.Body, a.Release = *bp, release
	return a, nil
}

func (v *View) contractGet() http.HandlerFunc {
	return handle(v, func(r *http.Request, q *api.Query) (chain.TxOutRef, error) {
		return pathRef(r, "contractId", "contract id", "bad_contract_id")
	}, func(ctx context.Context, id chain.TxOutRef) (api.Answer, error) {
		c, at, err := v.env.Contracts.ContractGet(ctx, id)
		if err != nil {
			return api.Answer{At: at}, missing(err, notFound("Contract not found"))
		}
		return one(at, item{Resource: contractStateOf(c), Links: transactionsLink{Transactions: linkTransactions(c.ID)}})
	})
}
