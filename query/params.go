package query

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/record"
)

// Limits on query parameters.
const (
	maxValues    = 100  // values of one list parameter
	maxTagLength = 1024 // bytes of a tag
)

// query is a request's parameters, checked against the route's names.
type query struct {
	v url.Values
}

// parseQuery reads the query string; names outside allowed (and minSeq,
// accepted everywhere) are refused.
func parseQuery(r *http.Request, allowed ...string) (*query, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, bad("bad_query", "malformed query string: "+err.Error())
	}
	for name := range v {
		ok := name == "minSeq"
		for _, a := range allowed {
			ok = ok || name == a
		}
		if !ok {
			if len(allowed) == 0 {
				return nil, bad("unknown_parameter", fmt.Sprintf("unknown parameter %q: this resource takes only minSeq", clip(name)))
			}
			return nil, bad("unknown_parameter", fmt.Sprintf("unknown parameter %q: this resource takes %s and minSeq",
				clip(name), strings.Join(allowed, ", ")))
		}
	}
	return &query{v: v}, nil
}

// clip shortens client text quoted in a message.
func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// one returns a parameter given at most once ("" when absent).
func (q *query) one(name string) (string, error) {
	vs := q.v[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", bad("repeated_parameter", fmt.Sprintf("parameter %s is given %d times; it takes one value", name, len(vs)))
}

// list returns a repeatable parameter's values.
func (q *query) list(name string) ([]string, error) {
	vs := q.v[name]
	if len(vs) > maxValues {
		return nil, bad("too_many_values", fmt.Sprintf("parameter %s is given %d times; at most %d", name, len(vs), maxValues))
	}
	return vs, nil
}

// limit returns the page size: 1..contractstore.MaxLimit, DefaultLimit when absent.
func (q *query) limit() (int, error) {
	s, err := q.one("limit")
	if err != nil || s == "" {
		return DefaultLimit, err
	}
	n, perr := strconv.Atoi(s)
	if perr != nil || n < 1 || n > contractstore.MaxLimit {
		return 0, bad("bad_limit", fmt.Sprintf("limit %q: want an integer from 1 to %d", clip(s), contractstore.MaxLimit))
	}
	return n, nil
}

// minSeq returns the seq to wait for (0 for none).
func (q *query) minSeq() (int64, error) {
	s, err := q.one("minSeq")
	if err != nil || s == "" {
		return 0, err
	}
	n, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil || n < 0 {
		return 0, bad("bad_min_seq", fmt.Sprintf("minSeq %q: want a non-negative integer", clip(s)))
	}
	return n, nil
}

// flag reads a boolean parameter: true or false.
func (q *query) flag(name string) (bool, error) {
	s, err := q.one(name)
	switch {
	case err != nil:
		return false, err
	case s == "" || s == "false":
		return false, nil
	case s == "true":
		return true, nil
	}
	return false, bad("bad_parameter", fmt.Sprintf("%s %q: want true or false", name, clip(s)))
}

// parseContractID reads a contract id or any output reference, TXID#INDEX.
func parseContractID(what, s string) (chain.TxOutRef, error) {
	ref, err := chain.ParseTxOutRef(s)
	if err != nil {
		return ref, bad("bad_"+what, fmt.Sprintf("%s %q: want TXID#INDEX (64 hex digits, #, an index; # is %%23 in a URL)", what, clip(s)))
	}
	return ref, nil
}

func parseTxID(s string) (chain.Hash32, error) {
	h, err := chain.ParseHash32(s)
	if err != nil {
		return h, bad("bad_tx_id", fmt.Sprintf("transaction id %q: want 64 hex digits", clip(s)))
	}
	return h, nil
}

// parsePolicy reads a minting policy id: 56 hex digits, or "" (no roles)
// when empty is allowed.
func parsePolicy(s string, emptyOK bool) ([]byte, error) {
	if s == "" && emptyOK {
		return []byte{}, nil
	}
	if len(s) != 56 {
		return nil, bad("bad_policy", fmt.Sprintf("policy id %q: want 56 hex digits", clip(s)))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, bad("bad_policy", fmt.Sprintf("policy id %q: want 56 hex digits", clip(s)))
	}
	return b, nil
}

// parseRole reads POLICY.NAME: the policy id in hex, a dot, the role name
// as text (the Marlowe name escape for names that are not UTF-8).
func parseRole(s string) (record.RoleRef, error) {
	policy, name, ok := strings.Cut(s, ".")
	if !ok {
		return record.RoleRef{}, bad("bad_role", fmt.Sprintf("role %q: want POLICY.NAME", clip(s)))
	}
	cur, err := parsePolicy(policy, false)
	if err != nil {
		return record.RoleRef{}, bad("bad_role", fmt.Sprintf("role %q: the policy id must be 56 hex digits", clip(s)))
	}
	nb, err := marlowe.NameFromText(name)
	if err != nil || len(nb) > 32 {
		return record.RoleRef{}, bad("bad_role", fmt.Sprintf("role %q: the name is not a token name of at most 32 bytes", clip(s)))
	}
	return record.RoleRef{Currency: cur, Name: nb}, nil
}

// parseAddress reads a bech32 address and returns it as the store keeps it.
func parseAddress(s string) (string, error) {
	pa, err := marlowe.ParsePartyAddress(s)
	if err == nil {
		var text string
		if text, err = pa.Bech32(); err == nil {
			return text, nil
		}
	}
	return "", bad("bad_address", fmt.Sprintf("address %q: %v", clip(s), err))
}

func parseTag(s string) (string, error) {
	if s == "" || len(s) > maxTagLength || !utf8.ValidString(s) {
		return "", bad("bad_tag", fmt.Sprintf("tag %q: want UTF-8 text of 1 to %d bytes", clip(s), maxTagLength))
	}
	return s, nil
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

func encodeCursor(kind string, parts ...string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + strings.Join(parts, ":")))
}

// decodeCursor returns the parts of a cursor of kind; want is how many.
func decodeCursor(s, kind string, want int) ([]string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(s) > 256 {
		return nil, bad("bad_cursor", "malformed cursor: use the cursor or next link of a previous page")
	}
	parts := strings.Split(string(raw), ":")
	if parts[0] != kind || len(parts) != want+1 {
		return nil, bad("bad_cursor", "the cursor belongs to another list or order: use the cursor or next link of a previous page of this one")
	}
	return parts[1:], nil
}

// cursorInts decodes a cursor made of non-negative integers.
func cursorInts(s, kind string, want int) ([]int64, error) {
	parts, err := decodeCursor(s, kind, want)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return nil, bad("bad_cursor", "malformed cursor: use the cursor or next link of a previous page")
		}
		out[i] = n
	}
	return out, nil
}

// cursor reads the request's cursor parameter as want integers of a cursor
// of kind; nil when there is none.
func (q *query) cursor(kind string, want int) ([]int64, error) {
	c, err := q.one("cursor")
	if err != nil || c == "" {
		return nil, err
	}
	return cursorInts(c, kind, want)
}

// cursorAfter reads a one-integer cursor of kind: the position a page
// starts after, 0 when there is no cursor.
func (q *query) cursorAfter(kind string) (int64, error) {
	n, err := q.cursor(kind, 1)
	if err != nil || n == nil {
		return 0, err
	}
	return n[0], nil
}

// nextLink is the request's URL with the cursor set.
func nextLink(r *http.Request, q *query, cursor string) *string {
	v := url.Values{}
	for k, vs := range q.v {
		if k != "cursor" {
			v[k] = vs
		}
	}
	v.Set("cursor", cursor)
	link := r.URL.EscapedPath() + "?" + v.Encode()
	return &link
}
