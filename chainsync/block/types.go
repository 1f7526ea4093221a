// Package block reads the parts of Cardano blocks the follower needs, straight
// from their CBOR: the header of a block of any era (its point and number),
// and for Alonzo, Babbage and Conway blocks the transactions with their
// inputs, outputs, datums, redeemers, validity interval, metadata and
// validity flag. It keeps the raw bytes of datums, redeemers and metadata, so
// hashes are computed over what was on chain. It also builds Conway blocks,
// which the built-in devnet node serves.
package block

import (
	"github.com/marlowe-follower/follower/chainsync/chain"
)

// Type is the block type of the node-to-client protocol: the hard-fork
// combinator's era tag.
type Type uint

// Block types.
const (
	TypeByronEBB Type = 0
	TypeByron    Type = 1
	TypeShelley  Type = 2
	TypeAllegra  Type = 3
	TypeMary     Type = 4
	TypeAlonzo   Type = 5
	TypeBabbage  Type = 6
	TypeConway   Type = 7
)

// HasPlutus reports whether blocks of this type can carry Plutus scripts,
// datums and redeemers (Alonzo and later).
func (t Type) HasPlutus() bool { return t >= TypeAlonzo && t <= TypeConway }

// String names the era.
func (t Type) String() string {
	switch t {
	case TypeByronEBB:
		return "byron-ebb"
	case TypeByron:
		return "byron"
	case TypeShelley:
		return "shelley"
	case TypeAllegra:
		return "allegra"
	case TypeMary:
		return "mary"
	case TypeAlonzo:
		return "alonzo"
	case TypeBabbage:
		return "babbage"
	case TypeConway:
		return "conway"
	}
	return "unknown"
}

// Block is a decoded block.
type Block struct {
	Type   Type
	Header chain.BlockHeader
	// PrevHash is the hash of the previous block; zero for the first block.
	PrevHash chain.Hash32
	// Txs are the transactions in block order. Decoded only for Alonzo and
	// later blocks by DecodeBlock; empty for earlier eras and for DecodeHeader.
	Txs []Tx
}

// Tx is the part of a transaction the follower needs.
type Tx struct {
	ID    chain.Hash32 // blake2b-256 of the transaction body's raw bytes
	Index int          // position in the block

	Inputs          []chain.TxOutRef // in wire order (the ledger sorts them; see SortedInputs)
	Collateral      []chain.TxOutRef
	ReferenceInputs []chain.TxOutRef
	Outputs         []TxOut
	// CollateralReturn is the output created instead of Outputs when the
	// transaction fails phase-2 validation; its index is len(Outputs).
	CollateralReturn *TxOut
	Fee              uint64
	Mint             []MintAsset

	// ValidityStart is the first slot in which the transaction is valid
	// (body key 8) and TTL the first slot in which it is no longer valid
	// (body key 3); nil when absent.
	ValidityStart *uint64
	TTL           *uint64

	// Datums are the Plutus data of the witness set by datum hash, raw CBOR.
	Datums map[chain.Hash32][]byte
	// Redeemers of the witness set, in the order they appear.
	Redeemers []Redeemer
	// Metadata is the transaction metadata (auxiliary data), in wire order.
	Metadata []Metadatum

	// IsValid is false when the block lists the transaction among its
	// invalid transactions: it failed phase-2 validation and only its
	// collateral was consumed.
	IsValid bool
}

// TxOut is a transaction output.
type TxOut struct {
	Address []byte // raw address bytes (header byte first)
	Value   Value
	// DatumHash is set when the output carries a datum by hash.
	DatumHash *chain.Hash32
	// InlineDatum is the raw CBOR of an inline datum (tag 24 removed).
	InlineDatum []byte
	// HasScriptRef reports a reference script on the output.
	HasScriptRef bool
}

// Value is an amount of lovelace and native assets.
type Value struct {
	Lovelace uint64
	Assets   []Asset
}

// Asset is a quantity of one native asset held by an output.
type Asset struct {
	Policy   chain.Hash28
	Name     []byte
	Quantity uint64
}

// MintAsset is a quantity of one native asset minted (positive) or burned
// (negative) by a transaction.
type MintAsset struct {
	Policy   chain.Hash28
	Name     []byte
	Quantity int64
}

// RedeemerTag says what a redeemer is for.
type RedeemerTag uint8

// Redeemer tags.
const (
	RedeemerSpend     RedeemerTag = 0
	RedeemerMint      RedeemerTag = 1
	RedeemerCert      RedeemerTag = 2
	RedeemerReward    RedeemerTag = 3
	RedeemerVoting    RedeemerTag = 4
	RedeemerProposing RedeemerTag = 5
)

// Redeemer is one redeemer of a transaction's witness set. For a spend
// redeemer, Index is the position of the input in the sorted input set.
type Redeemer struct {
	Tag   RedeemerTag
	Index uint32
	Data  []byte // raw CBOR of the redeemer's Plutus data
	Mem   uint64
	Steps uint64
}

// Metadatum is one metadata entry: a label and the raw CBOR of its value.
type Metadatum struct {
	Label uint64
	Value []byte
}
