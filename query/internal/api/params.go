package api

import (
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
	MaxValues    = 100  // values of one list parameter
	MaxTagLength = 1024 // bytes of a tag
	// DefaultLimit is a native page's size when the request names none.
	DefaultLimit = 100
)

// Query is a request's query string, read once.
type Query struct {
	V url.Values
}

// ParseQuery reads the request's query string.
func ParseQuery(r *http.Request) (*Query, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, Bad("bad_query", "malformed query string: "+err.Error())
	}
	return &Query{V: v}, nil
}

// Allow refuses names outside allowed (minSeq, which every route takes,
// aside), as the native API does.
func (q *Query) Allow(allowed ...string) error {
	for name := range q.V {
		ok := name == "minSeq"
		for _, a := range allowed {
			ok = ok || name == a
		}
		if ok {
			continue
		}
		if len(allowed) == 0 {
			return Bad("unknown_parameter", fmt.Sprintf("unknown parameter %q: this resource takes only minSeq", Clip(name)))
		}
		return Bad("unknown_parameter", fmt.Sprintf("unknown parameter %q: this resource takes %s and minSeq",
			Clip(name), strings.Join(allowed, ", ")))
	}
	return nil
}

// One returns a parameter given at most once ("" when absent).
func (q *Query) One(name string) (string, error) {
	vs := q.V[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", &BadRequest{Code: "repeated_parameter", Param: name,
		Message: fmt.Sprintf("parameter %s is given %d times; it takes one value", name, len(vs))}
}

// List returns a repeatable parameter's values.
func (q *Query) List(name string) ([]string, error) {
	vs := q.V[name]
	if len(vs) > MaxValues {
		return nil, &BadRequest{Code: "too_many_values", Param: name,
			Message: fmt.Sprintf("parameter %s is given %d times; at most %d", name, len(vs), MaxValues)}
	}
	return vs, nil
}

// Each calls fn with each value of a repeatable parameter, stopping at the
// first error; a *BadRequest it returns is marked as the parameter's.
func (q *Query) Each(name string, fn func(string) error) error {
	vs, err := q.List(name)
	for _, v := range vs {
		if err != nil {
			break
		}
		err = fn(v)
	}
	if br, ok := err.(*BadRequest); ok && br.Param == "" {
		named := *br
		named.Param = name
		return &named
	}
	return err
}

// Values reads the repeatable parameter name, each value through parse;
// the first value that does not parse answers its error.
func Values[T any](q *Query, name string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	err := q.Each(name, func(v string) error {
		t, err := parse(v)
		out = append(out, t)
		return err
	})
	return out, err
}

// valuesInto sets *dst to the values of name (Values) unless *err already
// holds an error, and leaves the first error in *err.
func valuesInto[T any](q *Query, err *error, name string, parse func(string) (T, error), dst *[]T) {
	if *err == nil {
		*dst, *err = Values(q, name, parse)
	}
}

// Limit returns the native page size: 1..contractstore.MaxLimit,
// DefaultLimit when absent.
func (q *Query) Limit() (int, error) {
	s, err := q.One("limit")
	if err != nil || s == "" {
		return DefaultLimit, err
	}
	n, perr := strconv.Atoi(s)
	if perr != nil || n < 1 || n > contractstore.MaxLimit {
		return 0, Bad("bad_limit", fmt.Sprintf("limit %q: want an integer from 1 to %d", Clip(s), contractstore.MaxLimit))
	}
	return n, nil
}

// MinSeq returns the seq to wait for (0 for none).
func (q *Query) MinSeq() (int64, error) {
	s, err := q.One("minSeq")
	if err != nil || s == "" {
		return 0, err
	}
	n, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil || n < 0 {
		return 0, &BadRequest{Code: "bad_min_seq", Param: "minSeq", Message: fmt.Sprintf("minSeq %q: want a non-negative integer", Clip(s))}
	}
	return n, nil
}

// Flag reads a boolean parameter: true or false.
func (q *Query) Flag(name string) (bool, error) {
	s, err := q.One(name)
	switch {
	case err != nil:
		return false, err
	case s == "" || s == "false":
		return false, nil
	case s == "true":
		return true, nil
	}
	return false, &BadRequest{Code: "bad_parameter", Param: name, Message: fmt.Sprintf("%s %q: want true or false", name, Clip(s))}
}

// Clip shortens client text quoted in a message.
func Clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// ParseRef reads a contract id, a payout id or any output reference,
// TXID#INDEX; what names it (contract_id, payout_id): the code is
// bad_<what>, and the message names the parameter the client gave, what
// in camel case (contractId, payoutId).
func ParseRef(what, s string) (chain.TxOutRef, error) {
	ref, err := chain.ParseTxOutRef(s)
	if err != nil {
		return ref, Bad("bad_"+what, fmt.Sprintf("%s %q: want TXID#INDEX (64 hex digits, #, an index; # is %%23 in a URL)", camel(what), Clip(s)))
	}
	return ref, nil
}

// camel turns snake_case into camelCase: contract_id is contractId.
func camel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if p := parts[i]; p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

// ParseTxID reads a transaction id: 64 hex digits.
func ParseTxID(s string) (chain.Hash32, error) {
	h, err := chain.ParseHash32(s)
	if err != nil {
		return h, Bad("bad_tx_id", fmt.Sprintf("transaction id %q: want 64 hex digits", Clip(s)))
	}
	return h, nil
}

// ParsePolicy reads a minting policy id: 56 hex digits, or "" (no roles)
// when empty is allowed.
func ParsePolicy(s string, emptyOK bool) ([]byte, error) {
	if s == "" && emptyOK {
		return []byte{}, nil
	}
	b, err := hex.DecodeString(s)
	if len(s) != 56 || err != nil {
		return nil, Bad("bad_policy", fmt.Sprintf("policy id %q: want 56 hex digits", Clip(s)))
	}
	return b, nil
}

// ParseRole reads POLICY.NAME: the policy id in hex, a dot, the role name
// as text (the Marlowe name escape for names that are not UTF-8).
func ParseRole(s string) (record.RoleRef, error) {
	policy, name, ok := strings.Cut(s, ".")
	if !ok {
		return record.RoleRef{}, Bad("bad_role", fmt.Sprintf("role %q: want POLICY.NAME", Clip(s)))
	}
	cur, err := ParsePolicy(policy, false)
	if err != nil {
		return record.RoleRef{}, Bad("bad_role", fmt.Sprintf("role %q: the policy id must be 56 hex digits", Clip(s)))
	}
	nb, err := marlowe.NameFromText(name)
	if err != nil || len(nb) > 32 {
		return record.RoleRef{}, Bad("bad_role", fmt.Sprintf("role %q: the name is not a token name of at most 32 bytes", Clip(s)))
	}
	return record.RoleRef{Currency: cur, Name: nb}, nil
}

// ParseAddress reads a bech32 address and returns it as the store keeps it.
func ParseAddress(s string) (string, error) {
	pa, err := marlowe.ParsePartyAddress(s)
	if err == nil {
		var text string
		if text, err = pa.Bech32(); err == nil {
			return text, nil
		}
	}
	return "", Bad("bad_address", fmt.Sprintf("address %q: %v", Clip(s), err))
}

// ParseTag reads a Marlowe tag: 1 to MaxTagLength bytes of UTF-8.
func ParseTag(s string) (string, error) {
	if s == "" || len(s) > MaxTagLength || !utf8.ValidString(s) {
		return "", Bad("bad_tag", fmt.Sprintf("tag %q: want UTF-8 text of 1 to %d bytes", Clip(s), MaxTagLength))
	}
	return s, nil
}

// ContractFilter reads the filter vocabulary's contract names (docs/query.md,
// "Filters"): contractId, roleCurrency, tag, partyAddress, partyRole, and
// status when withStatus. Each list's values are OR-ed, the names AND-ed
// (the parties OR-ed together), as contractstore.ContractFilter applies them.
func ContractFilter(q *Query, withIDs, withStatus bool) (contractstore.ContractFilter, error) {
	var f contractstore.ContractFilter
	var err error
	if withIDs {
		valuesInto(q, &err, "contractId", func(v string) (chain.TxOutRef, error) { return ParseRef("contract_id", v) }, &f.Contracts)
	}
	valuesInto(q, &err, "roleCurrency", func(v string) ([]byte, error) { return ParsePolicy(v, true) }, &f.RolesCurrency)
	valuesInto(q, &err, "tag", ParseTag, &f.Tags)
	valuesInto(q, &err, "partyAddress", ParseAddress, &f.PartyAddress)
	valuesInto(q, &err, "partyRole", ParseRole, &f.PartyRole)
	if err != nil || !withStatus {
		return f, err
	}
	status, err := q.One("status")
	switch status {
	case "", "open", "closed":
		f.Status = contractstore.Status(status)
	default:
		err = &BadRequest{Code: "bad_status", Param: "status", Message: fmt.Sprintf("status %q: want open or closed", Clip(status))}
	}
	return f, err
}
