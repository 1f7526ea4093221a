package history

import (
	"context"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/history/record"
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
	RecordList(ctx context.Context, p *record.RecordListParams) ([]record.Record, error)

	// RecordRecent returns, in seq order, a short reference to every record
	// of a block after the given slot (rolled back ones and markers too):
	// the store keeps them in memory to know which records a rollback undoes.
	RecordRecent(ctx context.Context, afterSlot uint64) ([]record.RecordRef, error)

	// RecordGet reads one record by seq; ErrNotFound when there is none.
	RecordGet(ctx context.Context, seq int64) (*record.Record, error)

	// ContractGet returns a contract's index entry; ErrNotFound when the
	// contract was never created.
	ContractGet(ctx context.Context, id chain.TxOutRef) (*record.ContractIndex, error)

	// Close releases the backend's resources.
	Close() error
}

// InitParams identify the network the store follows.
type InitParams struct {
	NetworkMagic uint32
	// Migrated says the caller has applied every store's migrations
	// already (storage.DB.Migrate, as the service's one opener does): Init
	// then only records or checks the network.
	Migrated bool
}

// PartyAddition records parties a record brought into a contract (for
// example through a merkleized continuation).
type PartyAddition struct {
	Contract chain.TxOutRef
	Seq      int64 // the record that brought them
	Parties  []record.Party
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
	Records        []record.Record
	Marks          []RollbackMark
	Contracts      []record.ContractIndex
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
