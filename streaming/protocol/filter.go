package protocol

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history"
)

// MaxFilterTerms bounds the number of values in one filter.
const MaxFilterTerms = 1000

// Filter selects the records of a subscription. All selects every record
// and excludes the other fields. Otherwise at least one field must be set:
// values within a field are OR-ed, fields are AND-ed, except that party
// addresses and party roles are OR-ed together. RolledBack markers pass
// every filter except a Kinds list without "rolled_back", so a subscriber
// that saw a record also sees its rollback.
type Filter struct {
	All bool `json:"all,omitempty"`
	// Contracts are contract ids, "TXID#INDEX".
	Contracts []string `json:"contracts,omitempty"`
	// RolesCurrencies are roles currency policy ids, hex.
	RolesCurrencies []string `json:"rolesCurrencies,omitempty"`
	// Tags are Marlowe metadata tags.
	Tags []string `json:"tags,omitempty"`
	// PartyAddresses are bech32 addresses of address parties.
	PartyAddresses []string `json:"partyAddresses,omitempty"`
	// PartyRoles are role parties.
	PartyRoles []Role `json:"partyRoles,omitempty"`
	// Kinds are record kinds: contract_created, inputs_applied,
	// payout_withdrawn, apply_inputs_rejected, rolled_back.
	Kinds []string `json:"kinds,omitempty"`
}

// Role names a role token.
type Role struct {
	// Currency is the roles currency policy id, hex.
	Currency string `json:"currency"`
	// Name is the role name as in Marlowe's core JSON (its text, or the
	// \u0000-escaped hex form of a name that is not UTF-8).
	Name string `json:"name"`
}

func (f *Filter) terms() int {
	return len(f.Contracts) + len(f.RolesCurrencies) + len(f.Tags) + len(f.PartyAddresses) + len(f.PartyRoles) + len(f.Kinds)
}

// History checks the filter and returns it as the history store's filter.
func (f *Filter) History() (history.Filter, error) {
	var h history.Filter
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
			return h, fmt.Errorf("contracts: %w", err)
		}
		h.Contracts = append(h.Contracts, ref)
	}
	for _, c := range f.RolesCurrencies {
		b, err := parsePolicy(c)
		if err != nil {
			return h, fmt.Errorf("rolesCurrencies: %w", err)
		}
		h.RolesCurrency = append(h.RolesCurrency, b)
	}
	for _, t := range f.Tags {
		if t == "" {
			return h, fmt.Errorf("tags: empty tag")
		}
		h.Tags = append(h.Tags, t)
	}
	for _, a := range f.PartyAddresses {
		if a == "" {
			return h, fmt.Errorf("partyAddresses: empty address")
		}
		h.PartyAddress = append(h.PartyAddress, a)
	}
	for _, r := range f.PartyRoles {
		cur, err := parsePolicy(r.Currency)
		if err != nil {
			return h, fmt.Errorf("partyRoles: %w", err)
		}
		name, err := marlowe.NameFromText(r.Name)
		if err != nil {
			return h, fmt.Errorf("partyRoles: %w", err)
		}
		h.PartyRole = append(h.PartyRole, history.RoleRef{Currency: cur, Name: name})
	}
	for _, k := range f.Kinds {
		kind, err := history.ParseKind(k)
		if err != nil {
			return h, fmt.Errorf("kinds: %w", err)
		}
		h.Kinds = append(h.Kinds, kind)
	}
	return h, nil
}

func parsePolicy(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 28 {
		return nil, fmt.Errorf("policy id %q: want 56 hex digits", s)
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

// Query parameters of a filter in a URL (Server-Sent Events, tail).
const (
	ParamAll           = "all"
	ParamContract      = "contract"
	ParamRolesCurrency = "rolesCurrency"
	ParamTag           = "tag"
	ParamPartyAddress  = "partyAddress"
	ParamPartyRole     = "partyRole" // CURRENCY.NAME, the name as in core JSON
	ParamKind          = "kind"
)

// FilterFromQuery reads a filter from URL query parameters; each parameter
// may repeat.
func FilterFromQuery(q url.Values) (Filter, error) {
	var f Filter
	if v := q.Get(ParamAll); v != "" {
		switch v {
		case "1", "true", "yes":
			f.All = true
		case "0", "false", "no":
		default:
			return f, fmt.Errorf("all=%q: want true or false", v)
		}
	}
	f.Contracts = q[ParamContract]
	f.RolesCurrencies = q[ParamRolesCurrency]
	f.Tags = q[ParamTag]
	f.PartyAddresses = q[ParamPartyAddress]
	f.Kinds = q[ParamKind]
	for _, r := range q[ParamPartyRole] {
		cur, name, ok := strings.Cut(r, ".")
		if !ok {
			return f, fmt.Errorf("partyRole=%q: want CURRENCY.NAME", r)
		}
		f.PartyRoles = append(f.PartyRoles, Role{Currency: cur, Name: name})
	}
	return f, nil
}

// Query writes the filter as URL query parameters (FilterFromQuery reads them).
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
	add(ParamContract, f.Contracts)
	add(ParamRolesCurrency, f.RolesCurrencies)
	add(ParamTag, f.Tags)
	add(ParamPartyAddress, f.PartyAddresses)
	add(ParamKind, f.Kinds)
	for _, r := range f.PartyRoles {
		q.Add(ParamPartyRole, r.Currency+"."+r.Name)
	}
	return q
}
