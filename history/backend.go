package history

import (
	"context"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
)

// Backend is the storage of the history log. One process writes (the Store
// actor, through Commit); any number of goroutines read concurrently.
// Implementations: history/pgstore (PostgreSQL) and history/sqlitestore
// (an embedded SQLite file). history/historytest is the conformance suite
// every implementation passes.
type Backend interface {
	// Init opens the schema: it applies pending migrations, refuses a schema
	// newer than the binary (ErrSchemaTooNew) and a database filled from
	// another network (ErrWrongNetwork), and records the network on first use.
	Init(ctx context.Context, p *InitParams) error

	// Head returns the seq of the newest committed record (0 for an empty log).
	Head(ctx context.Context) (int64, error)

	// Commit writes one batch atomically: the records (whose seqs must
	// continue the log: head+1, head+2, ... else ErrSeqMismatch), the
	// rollback markings, the contract index changes, the chain checkpoint
	// and the Marlowe UTxO changes. Either all of it is durable or none.
	// It refuses a UTxO rollback below the stored horizon
	// (ErrRollbackTooDeep), a party addition to a contract not in the index
	// (ErrNotFound), payloads that are not JSON, unknown kinds and UTxO steps
	// with neither or both fields set. Blocks without UTxO changes leave no
	// entry in the checkpoint's Recent list, as in the classifier.
	Commit(ctx context.Context, p *CommitParams) error

	// CheckpointGet returns what the follower resumes from. On an empty
	// store it returns a Checkpoint with no breadcrumbs.
	CheckpointGet(ctx context.Context) (*Checkpoint, error)

	// RecordList reads records in seq order (see RecordListParams).
	RecordList(ctx context.Context, p *RecordListParams) ([]Record, error)

	// RecordRecent returns, in seq order, a short reference to every record
	// of a block after the given slot (rolled back ones and markers too):
	// the store keeps them in memory to know which records a rollback undoes.
	RecordRecent(ctx context.Context, afterSlot uint64) ([]RecordRef, error)

	// RecordGet reads one record by seq; ErrNotFound when there is none.
	RecordGet(ctx context.Context, seq int64) (*Record, error)

	// ContractGet returns a contract's index entry; ErrNotFound when the
	// contract was never created.
	ContractGet(ctx context.Context, id chain.TxOutRef) (*ContractIndex, error)

	// Close releases the backend's resources.
	Close() error
}

// InitParams identify the network the store follows.
type InitParams struct {
	NetworkMagic uint32
}

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

// PartyAddition records parties a record brought into a contract (for
// example through a merkleized continuation).
type PartyAddition struct {
	Contract chain.TxOutRef
	Seq      int64 // the record that brought them
	Parties  []Party
}

// RollbackMark marks records rolled back: every record other than a
// RolledBack marker, with a seq below MarkerSeq, in a block after To (slot
// greater than To.Slot), not yet rolled back, gets RolledBackBy = MarkerSeq.
// Nothing else changes.
type RollbackMark struct {
	MarkerSeq int64
	To        chain.Point
}

// CommitParams is one atomic batch. Within it, records are written first,
// then the marks applied in MarkerSeq order, then the contract index changes
// (whose seqs refer to records of this batch or earlier ones).
type CommitParams struct {
	Records        []Record
	Marks          []RollbackMark
	Contracts      []ContractIndex
	PartyAdditions []PartyAddition

	// Checkpoint is the chain position after the batch.
	Checkpoint CheckpointUpdate
}

// CheckpointUpdate is the chain-position part of a commit.
type CheckpointUpdate struct {
	// Breadcrumbs replace the stored ones (newest first).
	Breadcrumbs []chain.BlockHeader
	// Tip is the node's tip when the batch was made.
	Tip chain.Tip
	// UTxO holds, in chain order, the batch's roll-forward changes and
	// rollbacks of the tracked output set.
	UTxO []UTxOStep
	// Horizon, when not zero, replaces the stored horizon: the newest block
	// whose UTxO changes are no longer kept. Changes of blocks at or below
	// it are deleted.
	Horizon chain.BlockHeader
}

// UTxOStep is one step of the tracked output set: the changes of a block
// rolled forward, or a rollback to a point (undoing the changes of the
// blocks after it, which the store also knows).
type UTxOStep struct {
	Forward  *classify.UTxOChanges // set for a block rolled forward
	Rollback *chain.Point          // set for a rollback
}

// Checkpoint is what the follower resumes from.
type Checkpoint struct {
	Head        int64
	Breadcrumbs []chain.BlockHeader // newest first
	Tip         chain.Tip
	UTxOs       []classify.TrackedUTxO
	Recent      []classify.UTxOChanges // oldest first
	Horizon     chain.BlockHeader
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
