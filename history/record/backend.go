package record

import "github.com/marlowe-follower/follower/chainsync/chain"

// ContractIndex is what subscriptions and queries filter contracts by. It is
// written with the contract's creation and extended by later steps that
// bring new parties in. It is never removed, not even when the creation is
// rolled back: what a filter matches in the log must not change afterwards,
// or a subscriber catching up would see other records than a live one saw.
// A contract created again on a fork keeps its entry (CreatedSeq is updated).
type ContractIndex struct {
	ID            chain.TxOutRef
	Version       string
	RolesCurrency []byte // empty for contracts without roles
	Tags          []string
	Parties       []Party
	CreatedSeq    int64
	Block         chain.BlockHeader
}

// Party is a contract participant as filters see it: exactly one of an
// address (bech32 text) or a role, which is named with its roles currency.
type Party struct {
	Address string // bech32, set for address parties
	// RoleCurrency and Role are set for role parties.
	RoleCurrency []byte
	Role         []byte
}

// Mode says which records a list returns.
type Mode uint8

// List modes.
const (
	// ModeLog returns every record after the cursor: rolled-back records
	// and RolledBack markers included, as they were appended.
	ModeLog Mode = iota
	// ModeSnapshot returns the records current as of seq Snapshot (not
	// rolled back by a marker at or below it), markers excluded, with seq
	// after the cursor and at or below Snapshot.
	ModeSnapshot
)

// Filter selects records. Empty fields do not restrict. Lists are OR-ed
// within a field; fields are AND-ed, except that parties (addresses and
// roles) are OR-ed together. RolledBack markers pass every filter except a
// Kinds list without KindRolledBack.
type Filter struct {
	Contracts     []chain.TxOutRef
	RolesCurrency [][]byte
	Tags          []string
	PartyAddress  []string
	PartyRole     []RoleRef
	Kinds         []Kind
}

// RoleRef names a role token: its currency and name.
type RoleRef struct {
	Currency []byte
	Name     []byte
}

// IsAll reports whether the filter selects everything.
func (f *Filter) IsAll() bool {
	return len(f.Contracts) == 0 && len(f.RolesCurrency) == 0 && len(f.Tags) == 0 &&
		len(f.PartyAddress) == 0 && len(f.PartyRole) == 0 && len(f.Kinds) == 0
}

// RecordListParams select a page of records.
type RecordListParams struct {
	Filter   Filter
	Mode     Mode
	After    int64 // only records with a greater seq
	Snapshot int64 // for ModeSnapshot
	// UpTo, when not zero, returns only records with seq <= UpTo (in
	// ModeSnapshot, Snapshot bounds the seqs as well).
	UpTo  int64
	Limit int // at most this many (the backend caps it at MaxListLimit)
}

// Page limits of RecordList: the default when Limit is 0, and the cap. A
// subscription's page size must not exceed MaxListLimit (a short page is how
// it knows it reached the head).
const (
	DefaultListLimit = 1000
	MaxListLimit     = 10000
)

// RecordRef is the short form of a record.
type RecordRef struct {
	Seq          int64
	Slot         uint64
	Kind         Kind
	Contract     *chain.TxOutRef
	RolledBackBy *int64
}
