// Package classify turns chain events (a block rolled forward, a rollback to
// a point) into Marlowe chain events: the block header and only the
// transactions that touch Marlowe, with everything the history stage needs.
//
// The Classifier holds the Marlowe UTxO set (open contract outputs and
// unclaimed payouts). A prefilter looks at a block's raw bytes first: a block
// is decoded only if it contains one of the ten Marlowe script hashes or the
// transaction id of a tracked output; every other block only advances the
// point. The property test in this package shows that prefiltered
// classification equals classification with every block decoded.
package classify

import (
	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// Event is a Marlowe chain event: *RollForward, *RollBackward or *Undecodable.
type Event interface{ isEvent() }

// RollForward is one block: its header, its Marlowe-relevant transactions in
// block order, the UTxO set changes they made, and any decoding failures.
// Most blocks have no transactions here: they only advance the point.
type RollForward struct {
	Type   block.Type
	Header chain.BlockHeader
	Tip    chain.Tip
	// Decoded reports whether the block's transactions were decoded (the
	// prefilter matched, or every block is decoded).
	Decoded  bool
	Txs      []MarloweTx
	Changes  UTxOChanges
	Failures []DecodeFailure
}

// RollBackward rolls the chain back to Point: every block after it is gone.
type RollBackward struct {
	Point chain.Point
	Tip   chain.Tip
	// Undone are the UTxO set changes of the blocks rolled back, newest
	// block first, as they were undone.
	Undone []UTxOChanges
}

// Undecodable is a block whose header could not be read. It has no point, so
// it cannot advance the chain position; it is reported so that the failure
// is recorded and counted rather than skipped in silence.
type Undecodable struct {
	Type   block.Type
	Size   int
	Tip    chain.Tip
	Reason string
}

func (*RollForward) isEvent()  {}
func (*RollBackward) isEvent() {}
func (*Undecodable) isEvent()  {}

// DecodeFailure reports a block or transaction that could not be decoded or
// understood. TxIndex is -1 for the block as a whole.
type DecodeFailure struct {
	TxIndex int          `json:"txIndex"`
	TxID    chain.Hash32 `json:"txId"` // zero when unknown
	Reason  string       `json:"reason"`
}

// MarloweTx is a transaction that creates, applies inputs to, or withdraws
// payouts of Marlowe contracts.
type MarloweTx struct {
	ID      chain.Hash32
	Index   int // position in the block
	IsValid bool
	// Validity interval in slots: ValidityStart is the first valid slot and
	// TTL the first invalid one; nil when the transaction leaves it open.
	ValidityStart *uint64
	TTL           *uint64
	// MarloweMetadata is the raw CBOR of the value under metadata label
	// 1564 (Marlowe tags), nil when absent; Metadata is every label.
	MarloweMetadata []byte
	Metadata        []block.Metadatum

	// ContractInputs are the tracked contract outputs the transaction spends,
	// each with its redeemer.
	ContractInputs []ContractInput
	// PayoutInputs are the tracked payout outputs it spends.
	PayoutInputs []PayoutInput
	// Creates are the outputs that start new contracts.
	Creates []ContractOutput
	// Continuations are contract outputs that continue a spent contract (at
	// most one per contract input: the output to the identical address).
	Continuations []ContractOutput
	// Payouts are the outputs to a payout validator made by applying inputs.
	Payouts []PayoutOutput
	// Rejected lists Marlowe outputs that cannot be followed, with why:
	// a datum that is missing or does not decode.
	Rejected []RejectedOutput
	// Outputs are all outputs of the transaction (address payouts are
	// ordinary outputs to the party's address).
	Outputs []block.TxOut
	// Datums are the witness set's datums by hash, raw CBOR: the
	// continuations of merkleized inputs are among them.
	Datums map[chain.Hash32][]byte
	// Mint is what the transaction mints and burns (role tokens).
	Mint []block.MintAsset
}

// ContractInput is a spent contract output with the redeemer that spent it.
type ContractInput struct {
	UTxO TrackedUTxO
	// Redeemer is the raw CBOR of the spend redeemer; nil if the witness set
	// has none for this input.
	Redeemer []byte
	// Inputs is the decoded redeemer; nil when Redeemer is nil or RedeemerError is set.
	Inputs        marlowe.Redeemer
	RedeemerError string
}

// PayoutInput is a spent payout output.
type PayoutInput struct {
	UTxO TrackedUTxO
}

// ContractOutput is an output to a Marlowe semantics validator whose datum
// decodes as MarloweData.
type ContractOutput struct {
	Ref     chain.TxOutRef
	Version string // script version, "v1".."v5"
	Address []byte
	Value   block.Value
	Datum   []byte // raw CBOR of the datum (inline or from the witness set)
	Data    *marlowe.MarloweData
	// ContractID is the contract the output belongs to: its own Ref for a
	// creation, the spent contract's id for a continuation.
	ContractID chain.TxOutRef
}

// PayoutOutput is an output to a Marlowe payout validator.
type PayoutOutput struct {
	Ref        chain.TxOutRef
	Version    string
	Address    []byte
	Value      block.Value
	Datum      []byte
	Payout     *marlowe.PayoutDatum
	ContractID chain.TxOutRef
}

// RejectedOutput is an output to a Marlowe validator that cannot be followed.
type RejectedOutput struct {
	Ref     chain.TxOutRef
	Version string
	Role    marlowe.ScriptRole
	Reason  string
	// ContractID is set when the output was meant to continue or pay out a
	// contract, zero for a failed creation.
	ContractID chain.TxOutRef
}
