package query

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

func contractListParams(q *api.Query) (*contractstore.ContractListParams, error) {
	p := &contractstore.ContractListParams{}
	var err error
	if p.Limit, err = q.Limit(); err != nil {
		return nil, err
	}
	if p.Filter, err = api.ContractFilter(q, true, true); err != nil {
		return nil, err
	}
	order, err := q.One("order")
	if err != nil {
		return nil, err
	}
	kind := cursorContractsAsc
	switch order {
	case "", "asc":
	case "desc":
		p.Descending, kind = true, cursorContractsDesc
	default:
		return nil, api.Bad("bad_order", fmt.Sprintf("order %q: want asc or desc", api.Clip(order)))
	}
	if p.After, err = cursorAfter(q, kind); err != nil {
		return nil, err
	}
	return p, nil
}

// Cursors are opaque to clients: base64url of a kind letter and numbers.
// Each list takes only its own kind.
const (
	cursorContractsAsc  = "ca"
	cursorContractsDesc = "cd"
	cursorTransactions  = "t"
	cursorPayouts       = "p"
	cursorWithdrawals   = "w"
	cursorHistory       = "h"
)

var errBadCursor = api.Bad("bad_cursor", "malformed cursor: use the cursor or next link of a previous page")

func encodeCursor(kind string, parts ...string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + strings.Join(parts, ":")))
}

// cursorParts is how many numbers a cursor of each kind holds.
var cursorParts = map[string]int{cursorContractsAsc: 1, cursorContractsDesc: 1, cursorTransactions: 1, cursorPayouts: 3,
	cursorWithdrawals: 1, cursorHistory: 3}

// decodeCursor returns the parts of a cursor of kind. A cursor of another
// kind, well made, is another list's or order's; any other text is
// malformed.
func decodeCursor(s, kind string) ([]string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(s) > 256 {
		return nil, errBadCursor
	}
	parts := strings.Split(string(raw), ":")
	if n, known := cursorParts[parts[0]]; !known || len(parts) != n+1 {
		return nil, errBadCursor
	}
	if parts[0] != kind {
		return nil, api.Bad("bad_cursor", "the cursor belongs to another list or order: use the cursor or next link of a previous page of this one")
	}
	return parts[1:], nil
}

// cursorParam reads the request's cursor parameter as the parts of a
// cursor of kind; nil when there is none.
func cursorParam(q *api.Query, kind string) ([]string, error) {
	c, err := q.One("cursor")
	if err != nil || c == "" {
		return nil, err
	}
	return decodeCursor(c, kind)
}

// cursorOf reads the request's cursor parameter as the non-negative
// integers of a cursor of kind; nil when there is none.
func cursorOf(q *api.Query, kind string) ([]int64, error) {
	parts, err := cursorParam(q, kind)
	if err != nil || parts == nil {
		return nil, err
	}
	out := make([]int64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return nil, errBadCursor
		}
		out[i] = n
	}
	return out, nil
}

// cursorAfter reads a one-integer cursor of kind: the position a page
// starts after, 0 when there is no cursor.
func cursorAfter(q *api.Query, kind string) (int64, error) {
	n, err := cursorOf(q, kind)
	if err != nil || n == nil {
		return 0, err
	}
	return n[0], nil
}

// nextLink is the request's URL with the cursor set.
func nextLink(r *http.Request, q *api.Query, cursor string) *string {
	v := url.Values{}
	for k, vs := range q.V {
		if k != "cursor" {
			v[k] = vs
		}
	}
	v.Set("cursor", cursor)
	link := r.URL.EscapedPath() + "?" + v.Encode()
	return &link
}
