// Package contractstore is the storage of the contract projection: per
// contract aggregates folded from the history log (contracts.Store writes
// them), their steps, payouts and withdrawals, and the projection's cursor,
// which is committed in the same transaction as the rows it accounts for.
//
// Backend is the one interface; sqlcontracts implements it over both
// databases of the storage layer (PostgreSQL, tables prefixed cv_ beside
// the history's; SQLite, its own contracts.sqlite file), and
// contractstoretest is the conformance suite it passes on both. Every read returns the Position it reflects, read in the same
// database snapshot as its rows, so an answer can say exactly which seq and
// chain point it stands at. Reads run concurrently on a pool; one writer
// commits.
package contractstore

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
)

// Sentinel errors of the contract store.
var (
	// ErrNotFound: no row with that key (the read's Position is still
	// valid); the storage layer's record.ErrNotFound.
	ErrNotFound = record.ErrNotFound
	// ErrConflict: the stored cursor is not the one a commit continues from
	// (another writer committed meanwhile).
	ErrConflict = errors.New("the contract store's cursor moved: another writer is active")
	// ErrSchemaTooNew: the schema was written by a newer binary (the one
	// sentinel of the storage layer, record.ErrSchemaTooNew).
	ErrSchemaTooNew = record.ErrSchemaTooNew
	// ErrClosed: the backend was closed; the storage layer's
	// record.ErrBackendClosed.
	ErrClosed = record.ErrBackendClosed
)

// Backend stores the contract projection. One writer (the projection)
// commits; any number of goroutines read concurrently.
type Backend interface {
	// Init applies pending migrations (refusing a newer schema with
	// ErrSchemaTooNew) and creates the cursor row on first use.
	Init(ctx context.Context) error
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// HeadGet returns the committed cursor and counters.
	HeadGet(ctx context.Context) (Head, error)
	// Commit writes one batch atomically (see CommitParams); ErrConflict when
	// the stored cursor is not p.PrevSeq.
	Commit(ctx context.Context, p *CommitParams) error
	// ContractsAfterSlot lists the contracts whose newest applied record is
	// in a block after slot: the ones a rollback to that slot changes.
	ContractsAfterSlot(ctx context.Context, slot uint64) ([]ContractRef, error)

	// ContractGet reads one contract with its body; ErrNotFound when there
	// is none as of the returned position.
	ContractGet(ctx context.Context, id chain.TxOutRef) (*Contract, Position, error)
	// ContractList reads a page of contract headers (Body nil).
	ContractList(ctx context.Context, p *ContractListParams) (*ContractPage, error)
	// TransactionList reads a page of one contract's steps (Payload nil
	// unless asked for); ErrNotFound when the contract does not exist.
	TransactionList(ctx context.Context, p *TransactionListParams) (*TransactionPage, error)
	// TransactionGet reads one step of a contract with its payload.
	TransactionGet(ctx context.Context, contract chain.TxOutRef, tx chain.Hash32) (*Transaction, Position, error)
	// TransactionProducing reads the step of a contract whose new contract
	// output is out, with its payload; ErrNotFound when no step made it (the
	// contract's first output, or no such output).
	TransactionProducing(ctx context.Context, contract chain.TxOutRef, out chain.TxOutRef) (*Transaction, Position, error)
	// TransactionSpending reads the applied step of a contract that spent
	// the contract output in, with its payload; ErrNotFound while no applied
	// step has spent it.
	TransactionSpending(ctx context.Context, contract chain.TxOutRef, in chain.TxOutRef) (*Transaction, Position, error)
	// TransactionOfTx reads the step (applied or rejected) a transaction
	// made, of whichever contract, with its payload; ErrNotFound when the
	// transaction stepped no contract as of the returned position.
	TransactionOfTx(ctx context.Context, tx chain.Hash32) (*Transaction, Position, error)
	// PayoutList reads a page of payouts.
	PayoutList(ctx context.Context, p *PayoutListParams) (*PayoutPage, error)
	// PayoutGet reads one payout.
	PayoutGet(ctx context.Context, id chain.TxOutRef) (*Payout, Position, error)
	// WithdrawalList reads a page of withdrawals, one per transaction.
	WithdrawalList(ctx context.Context, p *WithdrawalListParams) (*WithdrawalPage, error)
	// WithdrawalGet reads the withdrawal a transaction made.
	WithdrawalGet(ctx context.Context, tx chain.Hash32) (*Withdrawal, Position, error)
	// SourceGet reads a contract source and its first revelation;
	// ErrNotFound when no current record revealed it.
	SourceGet(ctx context.Context, hash chain.Hash32) (*SourceInfo, Position, error)
	// SourceClosure reads what a source reaches as far as the chain revealed
	// it (with the sources' contracts when withContracts); ErrNotFound when
	// no current record revealed the source itself.
	SourceClosure(ctx context.Context, hash chain.Hash32, withContracts bool) (*SourceClosure, Position, error)

	// Close releases the backend's resources; later calls fail with ErrClosed.
	Close() error
}

// Position is where the projection stands: the seq of the last history
// record it applied and that record's block (for a RolledBack marker, the
// point rolled back to).
type Position struct {
	Seq   int64             `json:"seq"`
	Block chain.BlockHeader `json:"block"`
}

// Head is the committed cursor with the projection's counters.
type Head struct {
	Position
	Contracts     int64 // contracts that exist
	OpenContracts int64 // of which open
}

// Status is a contract's status.
type Status string

// Contract statuses.
const (
	StatusOpen   Status = "open"
	StatusClosed Status = "closed"
)

// PayoutStatus is a payout's status.
type PayoutStatus string

// Payout statuses. A role payout is available until the role token's holder
// withdraws it; a payout to an address party is paid at once (there is
// nothing to withdraw).
const (
	PayoutAvailable PayoutStatus = "available"
	PayoutWithdrawn PayoutStatus = "withdrawn"
	PayoutPaid      PayoutStatus = "paid"
)

// TransactionKind tells an applied step from one that could not be read.
type TransactionKind string

// Transaction kinds.
const (
	TxApplied  TransactionKind = "applied"
	TxRejected TransactionKind = "rejected"
)

// ContractRef names a contract and its stored status.
type ContractRef struct {
	ID   chain.TxOutRef
	Open bool
}

// Contract is a contract aggregate.
type Contract struct {
	ID            chain.TxOutRef
	Seq           int64             // the contract_created record
	Block         chain.BlockHeader // the creating block
	Version       string            // script version, v1..v5
	RolesCurrency []byte            // empty for contracts without roles
	Address       string            // the semantics validator address (bech32)
	Tags          json.RawMessage   // object: tag -> payload or null
	Metadata      json.RawMessage   // object: metadata label -> JSON
	Status        Status
	Steps         int // transactions applied or rejected
	LastSeq       int64
	LastBlock     chain.BlockHeader
	// Body is nil in list results.
	Body *ContractBody
}

// ContractBody is the large part of a contract aggregate.
type ContractBody struct {
	InitialContract json.RawMessage `json:"initialContract"`
	InitialState    json.RawMessage `json:"initialState"`
	// Contract, State and UTxO are null once the contract closed.
	Contract json.RawMessage `json:"currentContract"`
	State    json.RawMessage `json:"state"`
	UTxO     *chain.TxOutRef `json:"utxo"`
	// Assets are the assets locked in the contract's output.
	Assets  record.Assets   `json:"assets"`
	Payouts []PayoutSummary `json:"payouts"`
	// SourceID is the contract source of its initial contract (Source.Hash;
	// nil when its datum does not parse).
	SourceID *chain.Hash32 `json:"sourceId,omitempty"`
}

// PayoutSummary is a payout as its contract lists it.
type PayoutSummary struct {
	ID         chain.TxOutRef `json:"payoutId"`
	Role       *string        `json:"role,omitempty"`
	Address    *string        `json:"address,omitempty"`
	Assets     record.Assets  `json:"assets"`
	Status     PayoutStatus   `json:"status"`
	Withdrawal *chain.Hash32  `json:"withdrawalId"`
}

// Transaction is one step of a contract: inputs applied, or a step that
// could not be read (the contract stays followed).
type Transaction struct {
	ContractID chain.TxOutRef
	TxID       chain.Hash32
	Seq        int64
	Block      chain.BlockHeader
	Kind       TransactionKind
	Input      chain.TxOutRef  // the contract output spent
	Output     *chain.TxOutRef // the new contract output; nil when closed or rejected
	Closed     bool
	Reason     string // for rejected steps
	// Payload is the history record's payload (history.InputsApplied or
	// history.ApplyInputsRejected); nil in list results.
	Payload json.RawMessage
}

// Payout is money a step paid out of a contract: to a role (withdrawn
// later) or straight to an address.
type Payout struct {
	ID            chain.TxOutRef
	ContractID    chain.TxOutRef
	TxID          chain.Hash32 // the step that paid it
	Seq           int64
	Block         chain.BlockHeader
	RolesCurrency []byte
	Role          *string // role name as text (Marlowe name escape)
	Address       *string
	Assets        record.Assets
	Status        PayoutStatus
	Withdrawal    *WithdrawalRef
	// ValidatorAddress is the address of a role payout's output (bech32);
	// "" for address payouts and for payouts stored before it was recorded.
	ValidatorAddress string
}

// WithdrawalRef says which transaction withdrew a payout.
type WithdrawalRef struct {
	TxID  chain.Hash32
	Seq   int64
	Block chain.BlockHeader
}

// Withdrawal is a transaction that withdrew payouts, of one or more
// contracts.
type Withdrawal struct {
	TxID    chain.Hash32
	Seq     int64 // its first payout_withdrawn record
	LastSeq int64 // its last one: a list resumes after it
	Block   chain.BlockHeader
	Payouts []Payout
}

// WithdrawalRow is one payout_withdrawn record: the payouts of one contract
// a transaction withdrew.
type WithdrawalRow struct {
	TxID       chain.Hash32
	ContractID chain.TxOutRef
	Seq        int64
	Block      chain.BlockHeader
}

// ContractTag indexes a contract by a tag.
type ContractTag struct {
	ContractID chain.TxOutRef
	Seq        int64 // the contract's creation seq (list order)
	Tag        string
}

// ContractParty indexes a contract by a party: an address (bech32) or a
// role (roles currency and role name bytes).
type ContractParty struct {
	ContractID chain.TxOutRef
	Seq        int64 // the contract's creation seq (list order)
	Party      record.Party
}

// Source is a contract source as the chain revealed it: the initial
// contract of a contract created on chain, or the continuation of a
// merkleized case that a step revealed. Its Hash is the datum hash of the
// contract's Plutus Data (blake2b-256 of its canonical CBOR), which is the
// Marlowe Runtime's ContractSourceId and a merkleized case's continuation
// hash.
type Source struct {
	Hash chain.Hash32
	// Contract is the contract in core JSON (nil where a read leaves it out).
	Contract json.RawMessage
	// Refs are the continuation hashes of its merkleized cases (the
	// Runtime's adjacency), ascending.
	Refs []chain.Hash32
}

// SourceLink says that a record of a contract revealed a source: the
// contract's creation (its initial contract) or one of its steps (a
// merkleized continuation).
type SourceLink struct {
	ContractID chain.TxOutRef
	Hash       chain.Hash32
	TxID       chain.Hash32 // the transaction that revealed it
	Seq        int64        // the record's seq
}

// SourceInfo is a source, where the chain first revealed it (of the
// current records: the link with the lowest seq), and which of its Refs no
// current record revealed yet (ascending).
type SourceInfo struct {
	Source
	Revealed   SourceLink
	Unrevealed []chain.Hash32
}

// SourceClosure is what a source reaches: itself and every revealed source
// its merkleized cases lead to, through revealed sources only (Sources, by
// hash), and the referenced hashes no current record revealed yet
// (Unrevealed, ascending).
type SourceClosure struct {
	Sources    []Source
	Unrevealed []chain.Hash32
}

// PayoutWithdrawal marks a stored payout withdrawn.
type PayoutWithdrawal struct {
	ID         chain.TxOutRef
	Withdrawal WithdrawalRef
}

// CommitParams is one atomic batch. The backend first deletes every row of
// the Reset contracts (a rollback rebuilds them) and the sources only they
// revealed, then upserts Contracts, inserts the other rows, applies
// PayoutsWithdrawn and writes Head.
type CommitParams struct {
	PrevSeq          int64
	Reset            []chain.TxOutRef
	Contracts        []Contract // with Body
	Tags             []ContractTag
	Parties          []ContractParty
	Transactions     []Transaction
	Payouts          []Payout
	PayoutsWithdrawn []PayoutWithdrawal
	Withdrawals      []WithdrawalRow
	// Sources are inserted unless stored (a source's rows depend on its
	// hash alone); SourceLinks unless the contract has one for the hash
	// (the first revelation stays). A reset contract's links go, and with
	// them the sources no other contract links.
	Sources     []Source
	SourceLinks []SourceLink
	Head        Head
}

// ContractFilter selects contracts as the Marlowe Runtime does: roles
// currency AND tag AND (party address OR party role) AND status, each list
// OR-ed within itself. Empty fields do not restrict.
type ContractFilter struct {
	// Contracts, when set, keeps only these contracts.
	Contracts     []chain.TxOutRef
	RolesCurrency [][]byte
	Tags          []string
	PartyAddress  []string
	PartyRole     []record.RoleRef
	Status        Status
}

// ContractListParams select a page of contracts in creation order.
type ContractListParams struct {
	Filter ContractFilter
	// After is the creation seq the page starts after (before, when
	// Descending); 0 starts at the beginning.
	After int64
	// From, when set, starts the page at this contract, included (in place
	// of After): its place is looked up in the page's statement. A contract
	// that does not exist starts no page (an empty one); one the filter
	// leaves out starts the page where it would be.
	From       *chain.TxOutRef
	Descending bool
	Limit      int
	// Count asks for the page's Total whatever the filter (counted in the
	// page's snapshot, kept for that state: see Total).
	Count bool
}

// ContractPage is a page of contract headers.
type ContractPage struct {
	At        Position
	Contracts []Contract
	More      bool
	// Total counts every contract matching the filter, as of At: always
	// when the params ask for Count, else only when the counters give it
	// (no filter, or a status filter only); nil otherwise. A count is kept
	// for the state it counted (the seq of At), so the pages of one list
	// count once until the projection commits.
	Total *int64
}

// TransactionListParams select a page of a contract's steps in seq order.
type TransactionListParams struct {
	Contract chain.TxOutRef
	// After is the seq the page starts after (before, when Descending); 0
	// starts at the beginning (the newest step, when Descending).
	After      int64
	Descending bool
	// AppliedOnly leaves out the steps that could not be read.
	AppliedOnly bool
	// WithPayload reads each step's payload too (lists leave it out).
	WithPayload bool
	Limit       int
	// Count asks for the page's Total.
	Count bool
}

// TransactionPage is a page of steps.
type TransactionPage struct {
	At           Position
	Transactions []Transaction
	More         bool
	// Total counts every step of the list as of At, when asked for.
	Total *int64
}

// PayoutKey orders payouts: by the seq of the step that paid them, then id.
type PayoutKey struct {
	Seq int64
	ID  chain.TxOutRef
}

// PayoutListParams select a page of payouts in PayoutKey order.
type PayoutListParams struct {
	Contracts []chain.TxOutRef
	Roles     []record.RoleRef
	Status    PayoutStatus // "" for any
	// RolesOnly keeps payouts to roles only (no address payouts).
	RolesOnly bool
	// After is the key the page starts after (before, when Descending); nil
	// starts at the beginning (the newest payout, when Descending).
	After      *PayoutKey
	Descending bool
	Limit      int
	// Count asks for the page's Total.
	Count bool
}

// PayoutPage is a page of payouts.
type PayoutPage struct {
	At      Position
	Payouts []Payout
	More    bool
	// Total counts every payout of the list as of At, when asked for.
	Total *int64
}

// WithdrawalListParams select a page of withdrawals in seq order.
type WithdrawalListParams struct {
	Contracts []chain.TxOutRef
	// RolesCurrency keeps the withdrawals of payouts under one of these roles
	// currencies; the payouts a withdrawal shows are not filtered by it.
	RolesCurrency [][]byte
	// After is the LastSeq of the last withdrawal of the previous page; when
	// Descending, the Seq of the last withdrawal of the previous page, the
	// page holding the withdrawals before it (0: the newest first).
	After      int64
	Descending bool
	Limit      int
	// Count asks for the page's Total.
	Count bool
}

// WithdrawalPage is a page of withdrawals.
type WithdrawalPage struct {
	At          Position
	Withdrawals []Withdrawal
	More        bool
	// Total counts every withdrawal of the list as of At, when asked for.
	Total *int64
}

// MaxLimit caps every page.
const MaxLimit = 1000
