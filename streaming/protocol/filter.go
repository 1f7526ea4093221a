package protocol

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/record"
)

// MaxFilterTerms bounds the number of values in one filter.
const MaxFilterTerms = 1000

// maxTagLength bounds a tag, in bytes (as the query API).
const maxTagLength = 1024

// The filter vocabulary: one name for each condition, the same as a query
// string parameter on every HTTP surface (the query API, GET /events) and
// as a key of the WebSocket subscribe command's filter object, each
// repeatable (in JSON: an array). docs/query.md, "Filters", lists them.
const (
	// NameContractID: a contract id, TXID#INDEX.
	NameContractID = "contractId"
	// NameRoleCurrency: a roles currency policy id (56 hex digits); empty
	// for contracts without roles.
	NameRoleCurrency = "roleCurrency"
	// NameTag: a Marlowe metadata tag.
	NameTag = "tag"
	// NamePartyAddress: a party's bech32 address.
	NamePartyAddress = "partyAddress"
	// NamePartyRole: a role party, POLICY.NAME (the name as in core JSON).
	NamePartyRole = "partyRole"
	// NameKind: a record kind (history records only).
	NameKind = "kind"
	// NameAll: every record (history records only), true or false.
	NameAll = "all"
)

// Query parameter names of a filter in a URL (Server-Sent Events, tail).
// The older spellings ParamContract and ParamRolesCurrency are aliases.
const (
	ParamAll           = NameAll
	ParamContractID    = NameContractID
	ParamRoleCurrency  = NameRoleCurrency
	ParamTag           = NameTag
	ParamPartyAddress  = NamePartyAddress
	ParamPartyRole     = NamePartyRole // POLICY.NAME, the name as in core JSON
	ParamKind          = NameKind
	ParamContract      = "contract"      // alias of contractId
	ParamRolesCurrency = "rolesCurrency" // alias of roleCurrency
)

// queryAliases are the older query parameter names, kept as aliases.
var queryAliases = map[string]string{ParamContract: NameContractID, ParamRolesCurrency: NameRoleCurrency}

// jsonAliases are the older keys of the subscribe filter object, kept as
// aliases. partyRoles takes objects {"currency", "name"}, partyRole
// POLICY.NAME strings.
var jsonAliases = map[string]string{
	"contracts": NameContractID, "rolesCurrencies": NameRoleCurrency, "tags": NameTag,
	"partyAddresses": NamePartyAddress, "partyRoles": NamePartyRole, "kinds": NameKind,
}

var filterNames = []string{NameContractID, NameRoleCurrency, NameTag, NamePartyAddress, NamePartyRole, NameKind, NameAll}

// QueryNames returns the query parameter names FilterFromQuery reads: the
// vocabulary and its aliases.
func QueryNames() []string {
	out := slices.Clone(filterNames)
	for a := range queryAliases {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// FilterError is a filter that cannot be read: a name that is not in the
// vocabulary (Unknown), a name given in two spellings, or a malformed value.
type FilterError struct {
	// Unknown is the name that is not in the vocabulary, when that is the
	// error.
	Unknown string
	Msg     string
}

// Error implements error.
func (e *FilterError) Error() string { return e.Msg }

func filterErrorf(format string, args ...any) error {
	return &FilterError{Msg: fmt.Sprintf(format, args...)}
}

// Filter selects the records of a subscription. All selects every record
// and excludes the other fields. Otherwise at least one field must be set:
// values within a field are OR-ed, fields are AND-ed, except that party
// addresses and party roles are OR-ed together. RolledBack markers pass
// every filter except a Kinds list without "rolled_back", so a subscriber
// that saw a record also sees its rollback.
//
// On the wire (MarshalJSON, UnmarshalJSON) each field is a key of the
// vocabulary, an array: {"contractId": [...], "roleCurrency": [...],
// "tag": [...], "partyAddress": [...], "partyRole": ["POLICY.NAME", ...],
// "kind": [...], "all": true}. The older keys contracts, rolesCurrencies,
// tags, partyAddresses, partyRoles ([{"currency", "name"}]) and kinds are
// read as aliases; a key given in both spellings, or a key outside both,
// is an error.
type Filter struct {
	All bool
	// Contracts are contract ids, "TXID#INDEX" (contractId).
	Contracts []string
	// RolesCurrencies are roles currency policy ids, hex; "" selects the
	// contracts without roles (roleCurrency).
	RolesCurrencies []string
	// Tags are Marlowe metadata tags (tag).
	Tags []string
	// PartyAddresses are bech32 addresses of address parties (partyAddress).
	PartyAddresses []string
	// PartyRoles are role parties (partyRole).
	PartyRoles []Role
	// Kinds are record kinds: contract_created, inputs_applied,
	// payout_withdrawn, apply_inputs_rejected, rolled_back (kind).
	Kinds []string
}

// Role names a role token.
type Role struct {
	// Currency is the roles currency policy id, hex.
	Currency string `json:"currency"`
	// Name is the role name as in Marlowe's core JSON (its text, or the
	// \u0000-escaped hex form of a name that is not UTF-8).
	Name string `json:"name"`
}

// String writes the role as POLICY.NAME.
func (r Role) String() string { return r.Currency + "." + r.Name }

// ParseRole reads POLICY.NAME: the policy id, a dot, the name (which may
// hold dots itself).
func ParseRole(s string) (Role, error) {
	cur, name, ok := strings.Cut(s, ".")
	if !ok {
		return Role{}, filterErrorf("%s %q: want POLICY.NAME", NamePartyRole, s)
	}
	return Role{Currency: cur, Name: name}, nil
}

// filterJSON is the wire form of a Filter.
type filterJSON struct {
	All          bool     `json:"all,omitempty"`
	ContractID   []string `json:"contractId,omitempty"`
	RoleCurrency []string `json:"roleCurrency,omitempty"`
	Tag          []string `json:"tag,omitempty"`
	PartyAddress []string `json:"partyAddress,omitempty"`
	PartyRole    []string `json:"partyRole,omitempty"`
	Kind         []string `json:"kind,omitempty"`
}

// MarshalJSON writes the filter with the vocabulary's names.
func (f Filter) MarshalJSON() ([]byte, error) {
	w := filterJSON{All: f.All, ContractID: f.Contracts, RoleCurrency: f.RolesCurrencies, Tag: f.Tags,
		PartyAddress: f.PartyAddresses, Kind: f.Kinds}
	for _, r := range f.PartyRoles {
		w.PartyRole = append(w.PartyRole, r.String())
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a filter object: the vocabulary's names, or their
// older spellings; errors are *FilterError.
func (f *Filter) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return filterErrorf("the filter is not a JSON object: %v", err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out Filter
	given := map[string]string{} // name -> the spelling given
	for _, k := range keys {
		name := k
		if a, ok := jsonAliases[k]; ok {
			name = a
		}
		if !slices.Contains(filterNames, name) {
			return &FilterError{Unknown: k, Msg: fmt.Sprintf("unknown filter key %q: the filter takes %s (docs/query.md, \"Filters\")",
				clip(k), strings.Join(filterNames, ", "))}
		}
		if other, ok := given[name]; ok {
			return filterErrorf("the filter gives %q and %q: they are two spellings of %s; give one", other, k, name)
		}
		given[name] = k
		raw := m[k]
		var err error
		switch {
		case name == NameAll:
			err = json.Unmarshal(raw, &out.All)
		case k == "partyRoles":
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err = dec.Decode(&out.PartyRoles); err == nil {
				for _, r := range out.PartyRoles {
					if strings.Contains(r.Currency, ".") {
						return filterErrorf("partyRoles: currency %q is not a policy id", clip(r.Currency))
					}
				}
			}
		case name == NamePartyRole:
			var ss []string
			if err = json.Unmarshal(raw, &ss); err == nil {
				for _, s := range ss {
					r, perr := ParseRole(s)
					if perr != nil {
						return perr
					}
					out.PartyRoles = append(out.PartyRoles, r)
				}
			}
		default:
			var ss []string
			err = json.Unmarshal(raw, &ss)
			switch name {
			case NameContractID:
				out.Contracts = ss
			case NameRoleCurrency:
				out.RolesCurrencies = ss
			case NameTag:
				out.Tags = ss
			case NamePartyAddress:
				out.PartyAddresses = ss
			case NameKind:
				out.Kinds = ss
			}
		}
		if err != nil {
			want := "an array of strings"
			switch {
			case name == NameAll:
				want = "true or false"
			case k == "partyRoles":
				want = `an array of {"currency", "name"}`
			}
			return filterErrorf("filter key %q: want %s", k, want)
		}
	}
	*f = out
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func (f *Filter) terms() int {
	return len(f.Contracts) + len(f.RolesCurrencies) + len(f.Tags) + len(f.PartyAddresses) + len(f.PartyRoles) + len(f.Kinds)
}

// Empty reports whether the filter sets nothing (not even All).
func (f *Filter) Empty() bool { return !f.All && f.terms() == 0 }

// History checks the filter and returns it as the history store's filter.
// The values are read as the query API reads them: contract ids TXID#INDEX,
// policy ids of 56 hex digits (or empty: no roles), tags of 1 to 1,024
// bytes of UTF-8, bech32 addresses, role names of at most 32 bytes.
func (f *Filter) History() (record.Filter, error) {
	var h record.Filter
	n := f.terms()
	switch {
	case f.All && n > 0:
		return h, fmt.Errorf("all excludes the other filter fields")
	case !f.All && n == 0:
		return h, fmt.Errorf(`the filter selects nothing: set a field, or "all": true`)
	case n > MaxFilterTerms:
		return h, fmt.Errorf("the filter has %d values; at most %d", n, MaxFilterTerms)
	}
	for _, c := range f.Contracts {
		ref, err := chain.ParseTxOutRef(c)
		if err != nil {
			return h, fmt.Errorf("%s %q: want TXID#INDEX: %w", NameContractID, clip(c), err)
		}
		h.Contracts = append(h.Contracts, ref)
	}
	for _, c := range f.RolesCurrencies {
		b, err := parsePolicy(c, true)
		if err != nil {
			return h, fmt.Errorf("%s: %w", NameRoleCurrency, err)
		}
		h.RolesCurrency = append(h.RolesCurrency, b)
	}
	for _, t := range f.Tags {
		if t == "" || len(t) > maxTagLength || !utf8.ValidString(t) {
			return h, fmt.Errorf("%s %q: want UTF-8 text of 1 to %d bytes", NameTag, clip(t), maxTagLength)
		}
		h.Tags = append(h.Tags, t)
	}
	for _, a := range f.PartyAddresses {
		pa, err := marlowe.ParsePartyAddress(a)
		var text string
		if err == nil {
			text, err = pa.Bech32()
		}
		if err != nil {
			return h, fmt.Errorf("%s %q: %v", NamePartyAddress, clip(a), err)
		}
		h.PartyAddress = append(h.PartyAddress, text)
	}
	for _, r := range f.PartyRoles {
		cur, err := parsePolicy(r.Currency, false)
		if err != nil {
			return h, fmt.Errorf("%s %q: %w", NamePartyRole, clip(r.String()), err)
		}
		name, err := marlowe.NameFromText(r.Name)
		if err == nil && len(name) > 32 {
			err = fmt.Errorf("the name has %d bytes; a token name has at most 32", len(name))
		}
		if err != nil {
			return h, fmt.Errorf("%s %q: %w", NamePartyRole, clip(r.String()), err)
		}
		h.PartyRole = append(h.PartyRole, record.RoleRef{Currency: cur, Name: name})
	}
	for _, k := range f.Kinds {
		kind, err := record.ParseKind(k)
		if err != nil {
			return h, fmt.Errorf("%s: %w", NameKind, err)
		}
		h.Kinds = append(h.Kinds, kind)
	}
	return h, nil
}

func parsePolicy(s string, emptyOK bool) ([]byte, error) {
	if s == "" && emptyOK {
		return []byte{}, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 28 {
		return nil, fmt.Errorf("policy id %q: want 56 hex digits", clip(s))
	}
	return b, nil
}

// Canonical returns the filter with every list sorted and deduplicated, so
// that two filters selecting the same records compare equal.
func (f *Filter) Canonical() Filter {
	norm := func(s []string) []string {
		if len(s) == 0 {
			return nil
		}
		out := slices.Clone(s)
		slices.Sort(out)
		return slices.Compact(out)
	}
	c := Filter{All: f.All, Contracts: norm(f.Contracts), RolesCurrencies: norm(lower(f.RolesCurrencies)),
		Tags: norm(f.Tags), PartyAddresses: norm(f.PartyAddresses), Kinds: norm(f.Kinds)}
	if len(f.PartyRoles) > 0 {
		c.PartyRoles = slices.Clone(f.PartyRoles)
		for i := range c.PartyRoles {
			c.PartyRoles[i].Currency = strings.ToLower(c.PartyRoles[i].Currency)
		}
		slices.SortFunc(c.PartyRoles, func(a, b Role) int {
			if x := strings.Compare(a.Currency, b.Currency); x != 0 {
				return x
			}
			return strings.Compare(a.Name, b.Name)
		})
		c.PartyRoles = slices.Compact(c.PartyRoles)
	}
	return c
}

func lower(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = strings.ToLower(x)
	}
	return out
}

// Equal reports whether two filters select the same records as written
// (after Canonical).
func (f *Filter) Equal(g *Filter) bool {
	a, _ := json.Marshal(f.Canonical())
	b, _ := json.Marshal(g.Canonical())
	return string(a) == string(b)
}

// FilterFromQuery reads a filter from URL query parameters: the
// vocabulary's names, and the aliases contract (contractId) and
// rolesCurrency (roleCurrency); each may repeat (all is given once).
// Other parameters are left alone: the caller refuses those it does not
// know (QueryNames lists the filter's). A name given in both spellings is
// a *FilterError.
func FilterFromQuery(q url.Values) (Filter, error) {
	var f Filter
	get := func(name string) ([]string, error) {
		vs := q[name]
		for alias, n := range queryAliases {
			if n != name || q[alias] == nil {
				continue
			}
			if vs != nil {
				return nil, filterErrorf("the query gives %s and %s: they are two spellings of %s; give one", name, alias, name)
			}
			vs = q[alias]
		}
		return vs, nil
	}
	if vs := q[ParamAll]; len(vs) > 0 {
		if len(vs) > 1 {
			return f, filterErrorf("%s is given %d times; it takes one value", ParamAll, len(vs))
		}
		switch vs[0] {
		case "1", "true", "yes":
			f.All = true
		case "0", "false", "no":
		default:
			return f, filterErrorf("%s=%q: want true or false", ParamAll, clip(vs[0]))
		}
	}
	var err error
	if f.Contracts, err = get(NameContractID); err != nil {
		return f, err
	}
	if f.RolesCurrencies, err = get(NameRoleCurrency); err != nil {
		return f, err
	}
	f.Tags = q[ParamTag]
	f.PartyAddresses = q[ParamPartyAddress]
	f.Kinds = q[ParamKind]
	for _, s := range q[ParamPartyRole] {
		r, err := ParseRole(s)
		if err != nil {
			return f, err
		}
		f.PartyRoles = append(f.PartyRoles, r)
	}
	return f, nil
}

// Query writes the filter as URL query parameters with the vocabulary's
// names (FilterFromQuery reads them).
func (f *Filter) Query() url.Values {
	q := url.Values{}
	if f.All {
		q.Set(ParamAll, "true")
	}
	add := func(k string, vs []string) {
		for _, v := range vs {
			q.Add(k, v)
		}
	}
	add(ParamContractID, f.Contracts)
	add(ParamRoleCurrency, f.RolesCurrencies)
	add(ParamTag, f.Tags)
	add(ParamPartyAddress, f.PartyAddresses)
	add(ParamKind, f.Kinds)
	for _, r := range f.PartyRoles {
		q.Add(ParamPartyRole, r.String())
	}
	return q
}
