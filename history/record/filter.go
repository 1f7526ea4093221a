package record

import (
	"bytes"
	"slices"
)

// Matches reports whether a record passes the filter, given the index entry
// of its contract (nil when the record has no contract). It is the in-memory
// twin of the backends' SQL: both must agree (the conformance suite and the
// store's tests check it).
func (f *Filter) Matches(r *Record, idx *ContractIndex) bool {
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, r.Kind) {
		return false
	}
	if r.Kind == KindRolledBack {
		return true
	}
	if len(f.Contracts) > 0 && (r.Contract == nil || !slices.Contains(f.Contracts, *r.Contract)) {
		return false
	}
	if !f.NeedsIndex() {
		return true
	}
	if idx == nil {
		return false
	}
	if len(f.RolesCurrency) > 0 && !slices.ContainsFunc(f.RolesCurrency, func(c []byte) bool { return bytes.Equal(c, idx.RolesCurrency) }) {
		return false
	}
	if len(f.Tags) > 0 && !slices.ContainsFunc(f.Tags, func(t string) bool { return slices.Contains(idx.Tags, t) }) {
		return false
	}
	if len(f.PartyAddress) > 0 || len(f.PartyRole) > 0 {
		for _, p := range idx.Parties {
			if p.Address != "" && slices.Contains(f.PartyAddress, p.Address) {
				return true
			}
			if p.Address == "" && slices.ContainsFunc(f.PartyRole, func(rr RoleRef) bool {
				return bytes.Equal(rr.Currency, p.RoleCurrency) && bytes.Equal(rr.Name, p.Role)
			}) {
				return true
			}
		}
		return false
	}
	return true
}

// NeedsIndex reports whether matching a record reads its contract's index
// entry (roles currency, tags, parties).
func (f *Filter) NeedsIndex() bool {
	return len(f.RolesCurrency) > 0 || len(f.Tags) > 0 || len(f.PartyAddress) > 0 || len(f.PartyRole) > 0
}

// mergeParties adds parties not yet in idx.
func (idx *ContractIndex) MergeParties(ps []Party) {
	for _, p := range ps {
		if !slices.ContainsFunc(idx.Parties, func(q Party) bool {
			return q.Address == p.Address && bytes.Equal(q.RoleCurrency, p.RoleCurrency) && bytes.Equal(q.Role, p.Role)
		}) {
			idx.Parties = append(idx.Parties, p.Detached())
		}
	}
}

// detached returns a copy of idx that shares no memory with it. Records'
// byte slices point into the raw block they were decoded from (the decoders
// do not copy), so an entry kept for the process's lifetime must not hold
// them: one roles currency would keep a whole block alive.
func (idx *ContractIndex) Detached() *ContractIndex {
	c := *idx
	c.RolesCurrency = bytes.Clone(idx.RolesCurrency)
	c.Tags = slices.Clone(idx.Tags)
	c.Parties = make([]Party, len(idx.Parties))
	for i, p := range idx.Parties {
		c.Parties[i] = p.Detached()
	}
	return &c
}

func (p Party) Detached() Party {
	p.RoleCurrency = bytes.Clone(p.RoleCurrency)
	p.Role = bytes.Clone(p.Role)
	return p
}
