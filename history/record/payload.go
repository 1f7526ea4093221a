package record

import (
	"encoding/json"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// Assets is a value as records show it: lovelace and native tokens by
// policy id (hex) and token name (text, escaped like Marlowe names), with
// quantities as exact integers.
type Assets struct {
	Lovelace uint64                            `json:"lovelace"`
	Tokens   map[string]map[string]json.Number `json:"tokens"`
}

// ContractCreated is the payload of a contract_created record.
type ContractCreated struct {
	ContractID    chain.TxOutRef             `json:"contractId"`
	Version       string                     `json:"version"`
	RolesCurrency string                     `json:"rolesCurrency"`
	Address       string                     `json:"address"`
	Assets        Assets                     `json:"assets"`
	Datum         json.RawMessage            `json:"datum"` // MarloweData in core JSON
	Tags          map[string]json.RawMessage `json:"tags"`  // tag -> its payload, or null
	Metadata      map[string]json.RawMessage `json:"metadata,omitempty"`
	// MintedRoles are the role tokens minted in the creating transaction
	// under the roles currency.
	MintedRoles []string `json:"mintedRoles,omitempty"`
}

// Interval is a step's validity interval: in slots as on chain
// (invalidBefore inclusive, invalidHereafter exclusive) and as the Marlowe
// semantics see it, POSIX milliseconds inclusive on both ends.
type Interval struct {
	InvalidBefore    *uint64 `json:"invalidBefore"`
	InvalidHereafter *uint64 `json:"invalidHereafter"`
	FromMillis       *int64  `json:"from"`
	ToMillis         *int64  `json:"to"`
}

// ContractOutput is a contract's output after a step.
type ContractOutput struct {
	Ref     chain.TxOutRef  `json:"utxo"`
	Address string          `json:"address"`
	Assets  Assets          `json:"assets"`
	Datum   json.RawMessage `json:"datum"` // MarloweData in core JSON
}

// Payout is money a step paid out of a contract: to a role (an output to
// the payout validator, withdrawn later by the role token's holder) or
// straight to an address.
//
// A payout is one output: its Assets are the output's value, and Payments
// lists the payments of the Marlowe semantics the output carries. One output
// may carry several payments to its payee (wallets and the Runtime's builder
// pay each payee's total in one output, as the validator checks totals per
// payee) and, for an address, more than the payments (the wallet's change or
// the minimum ada beside tokens). Every payment of the step to a party is in
// the Payments of exactly one payout of the record. A payment that no output
// carries is a payout without Ref whose Assets are the payment's.
//
// Records written before Payments existed have one payout per address
// payment with the payment's assets, and no Payments.
type Payout struct {
	Ref     *chain.TxOutRef `json:"payoutId,omitempty"` // the output, when found on chain
	Role    *string         `json:"role,omitempty"`
	Address *string         `json:"address,omitempty"`
	Assets  Assets          `json:"assets"`
	// ValidatorAddress is the address of a role payout's output (the payout
	// validator's, with whatever stake credential the output carries).
	ValidatorAddress *string `json:"validatorAddress,omitempty"`
	// Payments are the payments the output carries, in the order the
	// semantics made them; absent when the semantics could not be run (or
	// the record predates them).
	Payments []Payment `json:"payments,omitempty"`
}

// Payment is one payment of the Marlowe semantics to a party: one token's
// amount, from one of the contract's accounts.
type Payment struct {
	// From is the account's owner, a party in core JSON.
	From   json.RawMessage `json:"from,omitempty"`
	Assets Assets          `json:"assets"`
}

// InputsApplied is the payload of an inputs_applied record.
type InputsApplied struct {
	ContractID chain.TxOutRef `json:"contractId"`
	Version    string         `json:"version"`
	Input      chain.TxOutRef `json:"input"` // the contract output spent
	// Inputs are the Marlowe inputs in core JSON; merkleized ones carry
	// their resolved continuation.
	Inputs   json.RawMessage `json:"inputs"`
	Interval Interval        `json:"interval"`
	// Output is the contract's new output; nil when the step closed it.
	Output   *ContractOutput            `json:"output"`
	Closed   bool                       `json:"closed"`
	Payouts  []Payout                   `json:"payouts"`
	Tags     map[string]json.RawMessage `json:"tags,omitempty"`
	Metadata map[string]json.RawMessage `json:"metadata,omitempty"`
}

// WithdrawnPayout is one payout withdrawn (its assets are in the
// inputs_applied record that made it).
type WithdrawnPayout struct {
	Ref  chain.TxOutRef `json:"payoutId"`
	Role string         `json:"role"`
}

// PayoutWithdrawn is the payload of a payout_withdrawn record: the payouts of
// one contract a transaction withdrew.
type PayoutWithdrawn struct {
	ContractID chain.TxOutRef    `json:"contractId"`
	Payouts    []WithdrawnPayout `json:"payouts"`
}

// ApplyInputsRejected is the payload of an apply_inputs_rejected record: a
// step of the contract that could not be understood. The contract stays
// followed.
type ApplyInputsRejected struct {
	ContractID chain.TxOutRef `json:"contractId"`
	Input      chain.TxOutRef `json:"input"`
	Reason     string         `json:"reason"`
}

// RolledBack is the payload of a rolled_back record: every record of a
// block after To is rolled back by it.
type RolledBack struct {
	To chain.Point `json:"to"`
}
