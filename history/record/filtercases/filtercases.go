// Package filtercases is the filter vocabulary's semantics (docs/query.md,
// "Filters") as one table of cases that every implementation runs: the
// query API's contract lists (native and Runtime view, over the contract
// store's SQL), the history's reads (record.Filter.Matches and the
// backends' SQL), and streaming's filters (parsed from the same names).
//
// Each Case is a query string in the vocabulary's names and the contracts
// of Contracts it selects, written out by hand: an implementation loads
// Contracts into its own store (or builds each one's record.ContractIndex),
// asks with the case's parameters, and compares what it gets with Want.
// The semantics: contractId AND roleCurrency AND tag AND (partyAddress OR
// partyRole) AND status, the values of one name OR-ed.
package filtercases

import (
	"encoding/hex"
	"net/url"
	"slices"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/record"
)

// Contract is one contract the cases select from.
type Contract struct {
	Name          string
	ID            chain.TxOutRef
	RolesCurrency []byte // empty: a contract without roles
	Tags          []string
	Parties       []record.Party
	Open          bool
}

// Index returns the contract's entry in the history's contract index.
func (c *Contract) Index(seq int64) *record.ContractIndex {
	return &record.ContractIndex{ID: c.ID, Version: "v5", RolesCurrency: slices.Clone(c.RolesCurrency), Tags: slices.Clone(c.Tags),
		Parties: slices.Clone(c.Parties), CreatedSeq: seq}
}

// Currencies, addresses and role names of Contracts.
var (
	CurrencyA = policy(0xa1)
	CurrencyB = policy(0xb2)
	CurrencyC = policy(0xc3) // no contract has it
	Address1  = address(0x11)
	Address2  = address(0x22)
	Address3  = address(0x33) // no contract has it
)

// Contracts are the contracts every case selects from, in creation order.
var Contracts = []Contract{
	{Name: "c1", ID: ref(1), RolesCurrency: CurrencyA, Tags: []string{"alpha"}, Open: true,
		Parties: []record.Party{{Address: Address1}, role(CurrencyA, "buyer")}},
	{Name: "c2", ID: ref(2), Tags: []string{"beta"}, Open: false,
		Parties: []record.Party{{Address: Address2}}},
	{Name: "c3", ID: ref(3), RolesCurrency: CurrencyB, Tags: []string{"alpha", "beta"}, Open: true,
		Parties: []record.Party{role(CurrencyB, "seller"), {Address: Address1}}},
	{Name: "c4", ID: ref(4), RolesCurrency: CurrencyA, Open: false,
		Parties: []record.Party{role(CurrencyA, "seller")}},
	{Name: "c5", ID: ref(5), Tags: []string{"gamma"}, Open: true},
}

// Case is one filter and what it selects.
type Case struct {
	Name string
	// Params is the filter as a query string, in the vocabulary's names.
	Params url.Values
	// Want are the names of the selected contracts, in creation order.
	Want []string
}

// Names the cases use beyond those every contract list takes
// (roleCurrency, tag, partyAddress, partyRole): a surface without one of
// them skips the cases that use it (the Runtime view takes neither
// contractId nor status; the records surfaces take no status).
const (
	NameContractID = "contractId"
	NameStatus     = "status"
)

// Uses reports whether the case uses the name.
func (c *Case) Uses(name string) bool { _, ok := c.Params[name]; return ok }

// Cases returns the table.
func Cases() []Case {
	rc := hex.EncodeToString
	rl := func(p []byte, name string) string { return hex.EncodeToString(p) + "." + name }
	q := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	return []Case{
		{"no filter", q(), []string{"c1", "c2", "c3", "c4", "c5"}},
		{"contract", q("contractId", Contracts[2].ID.String()), []string{"c3"}},
		{"two contracts", q("contractId", Contracts[0].ID.String(), "contractId", Contracts[4].ID.String()), []string{"c1", "c5"}},
		{"unknown contract", q("contractId", ref(9).String()), nil},
		{"roles currency", q("roleCurrency", rc(CurrencyA)), []string{"c1", "c4"}},
		{"two roles currencies", q("roleCurrency", rc(CurrencyA), "roleCurrency", rc(CurrencyB)), []string{"c1", "c3", "c4"}},
		{"no roles currency (empty)", q("roleCurrency", ""), []string{"c2", "c5"}},
		{"an unused roles currency", q("roleCurrency", rc(CurrencyC)), nil},
		{"tag", q("tag", "alpha"), []string{"c1", "c3"}},
		{"two tags", q("tag", "beta", "tag", "gamma"), []string{"c2", "c3", "c5"}},
		{"unknown tag", q("tag", "omega"), nil},
		{"party address", q("partyAddress", Address1), []string{"c1", "c3"}},
		{"an unused party address", q("partyAddress", Address3), nil},
		{"party role", q("partyRole", rl(CurrencyA, "seller")), []string{"c4"}},
		{"role name of another currency", q("partyRole", rl(CurrencyB, "buyer")), nil},
		{"address or role", q("partyAddress", Address2, "partyRole", rl(CurrencyB, "seller")), []string{"c2", "c3"}},
		{"roles currency and tag", q("roleCurrency", rc(CurrencyA), "tag", "alpha"), []string{"c1"}},
		{"roles currency and a tag of none of its contracts", q("roleCurrency", rc(CurrencyA), "tag", "beta"), nil},
		{"tag and (address or role)", q("tag", "beta", "partyAddress", Address1, "partyRole", rl(CurrencyA, "buyer")), []string{"c3"}},
		{"roles currency and tag and (address or role)", q("roleCurrency", rc(CurrencyB), "roleCurrency", rc(CurrencyA),
			"tag", "alpha", "partyAddress", Address2, "partyRole", rl(CurrencyA, "buyer")), []string{"c1"}},
		{"contract and tag", q("contractId", Contracts[0].ID.String(), "contractId", Contracts[1].ID.String(), "tag", "beta"), []string{"c2"}},
		{"status open", q("status", "open"), []string{"c1", "c3", "c5"}},
		{"status closed and roles currency", q("status", "closed", "roleCurrency", rc(CurrencyA)), []string{"c4"}},
		{"status and tag", q("status", "open", "tag", "beta"), []string{"c3"}},
	}
}

// RecordFilter is the case's filter as the history reads it (status, which
// records do not have, aside).
func (c *Case) RecordFilter() (record.Filter, error) {
	var f record.Filter
	for _, s := range c.Params[NameContractID] {
		id, err := chain.ParseTxOutRef(s)
		if err != nil {
			return f, err
		}
		f.Contracts = append(f.Contracts, id)
	}
	for _, s := range c.Params["roleCurrency"] {
		b, err := hex.DecodeString(s)
		if err != nil {
			return f, err
		}
		f.RolesCurrency = append(f.RolesCurrency, b)
	}
	f.Tags = slices.Clone(c.Params["tag"])
	f.PartyAddress = slices.Clone(c.Params["partyAddress"])
	for _, s := range c.Params["partyRole"] {
		b, err := hex.DecodeString(s[:56])
		if err != nil {
			return f, err
		}
		f.PartyRole = append(f.PartyRole, record.RoleRef{Currency: b, Name: []byte(s[57:])})
	}
	return f, nil
}

// Selected returns the names of the contracts among ids, in the order of
// ids (an id not in Contracts is named by its text).
func Selected(ids []chain.TxOutRef) []string {
	var out []string
	for _, id := range ids {
		name := id.String()
		for i := range Contracts {
			if Contracts[i].ID == id {
				name = Contracts[i].Name
			}
		}
		out = append(out, name)
	}
	return out
}

func ref(n byte) chain.TxOutRef {
	var h chain.Hash32
	for i := range h {
		h[i] = 0xf0 | n
	}
	return chain.TxOutRef{TxID: h, Index: uint32(n)}
}

func policy(b byte) []byte {
	p := make([]byte, 28)
	for i := range p {
		p[i] = b
	}
	return p
}

func role(currency []byte, name string) record.Party {
	return record.Party{RoleCurrency: currency, Role: []byte(name)}
}

// address is a testnet key-hash address without a stake part.
func address(b byte) string {
	h := make([]byte, 28)
	for i := range h {
		h[i] = b
	}
	pa := marlowe.PartyAddress{Network: marlowe.Testnet, Address: marlowe.Address{Payment: marlowe.Credential{Kind: marlowe.PubKeyCredential, Hash: h}}}
	s, err := pa.Bech32()
	if err != nil {
		panic(err)
	}
	return s
}
