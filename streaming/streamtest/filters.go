package streamtest

import (
	"context"
	"encoding/hex"
	"slices"

	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// Sample holds values of every filter field taken from a history's
// contracts, and the filters that select them, for tests that put the
// same filter to several surfaces.
type Sample struct {
	ContractIDs    []string
	RoleCurrencies []string // hex; "" is a contract without roles
	Tags           []string
	PartyAddresses []string
	PartyRoles     []protocol.Role
}

// SampleFilters reads the index entries of the log's contracts and returns
// some values of each filter field (the most common ones first: a filter
// of them selects several contracts).
func SampleFilters(ctx context.Context, b history.Backend) (*Sample, error) {
	count := map[string]int{}
	var s Sample
	add := func(list *[]string, v string) {
		count[v]++
		if !slices.Contains(*list, v) {
			*list = append(*list, v)
		}
	}
	var roles []string
	for after := int64(0); ; {
		recs, err := b.RecordList(ctx, &record.RecordListParams{After: after, Limit: 1000,
			Filter: record.Filter{Kinds: []record.Kind{record.KindContractCreated}}})
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			break
		}
		after = recs[len(recs)-1].Seq
		for _, r := range recs {
			if r.Contract == nil {
				continue
			}
			idx, err := b.ContractGet(ctx, *r.Contract)
			if err != nil {
				return nil, err
			}
			if idx == nil {
				continue
			}
			if len(s.ContractIDs) < 5 && r.RolledBackBy == nil {
				s.ContractIDs = append(s.ContractIDs, r.Contract.String())
			}
			add(&s.RoleCurrencies, hex.EncodeToString(idx.RolesCurrency))
			for _, t := range idx.Tags {
				add(&s.Tags, t)
			}
			for _, p := range idx.Parties {
				if p.Address != "" {
					add(&s.PartyAddresses, p.Address)
				} else {
					add(&roles, hex.EncodeToString(p.RoleCurrency)+"."+marlowe.NameText(p.Role))
				}
			}
		}
	}
	byCount := func(list []string) []string {
		slices.SortStableFunc(list, func(a, b string) int { return count[b] - count[a] })
		return list
	}
	byCount(s.RoleCurrencies)
	byCount(s.Tags)
	byCount(s.PartyAddresses)
	for _, r := range byCount(roles) {
		role, _ := protocol.ParseRole(r)
		s.PartyRoles = append(s.PartyRoles, role)
	}
	return &s, nil
}

// first returns up to n values of a list.
func first[T any](list []T, n int) []T { return list[:min(n, len(list))] }

// Filters returns filters made of the sample's values: one per field, and
// combinations of fields, each selecting some records.
func (s *Sample) Filters() []protocol.Filter {
	var out []protocol.Filter
	if len(s.ContractIDs) > 0 {
		out = append(out, protocol.Filter{Contracts: first(s.ContractIDs, 2)})
	}
	if len(s.RoleCurrencies) > 0 {
		out = append(out, protocol.Filter{RolesCurrencies: first(s.RoleCurrencies, 1)},
			protocol.Filter{RolesCurrencies: first(s.RoleCurrencies, 3)})
	}
	if slices.Contains(s.RoleCurrencies, "") { // contracts without roles
		out = append(out, protocol.Filter{RolesCurrencies: []string{""}})
	}
	if len(s.Tags) > 0 {
		out = append(out, protocol.Filter{Tags: first(s.Tags, 2)})
	}
	if len(s.PartyAddresses) > 0 {
		out = append(out, protocol.Filter{PartyAddresses: first(s.PartyAddresses, 2)})
	}
	if len(s.PartyRoles) > 0 {
		out = append(out, protocol.Filter{PartyRoles: first(s.PartyRoles, 2)})
	}
	if len(s.PartyAddresses) > 0 && len(s.PartyRoles) > 0 {
		out = append(out, protocol.Filter{PartyAddresses: first(s.PartyAddresses, 1), PartyRoles: first(s.PartyRoles, 1)})
	}
	if len(s.RoleCurrencies) > 0 && len(s.Tags) > 0 {
		out = append(out, protocol.Filter{RolesCurrencies: first(s.RoleCurrencies, 3), Tags: first(s.Tags, 3),
			Kinds: []string{string(record.KindContractCreated), string(record.KindInputsApplied)}})
	}
	return out
}
