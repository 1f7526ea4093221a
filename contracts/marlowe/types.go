// Package marlowe holds the Marlowe Core V1 language as it appears on Cardano:
// contracts, states, inputs, datums and redeemers, with exact conversions to and
// from Plutus Data (the on-chain form) and the Marlowe "core" JSON form that the
// Marlowe tools read and write.
//
// Integers are arbitrary precision (*big.Int) everywhere; nothing passes through
// float64. Byte strings (token names, role names, choice names, currency
// symbols, hashes) are kept as the raw bytes found on chain; JSON shows names as
// UTF-8 with a lossless escape for names that are not valid UTF-8 (see names.go).
//
// Sum types are interfaces implemented by pointer types: a Contract is one of
// *Close, *Pay, *If, *When, *Let, *Assert, and so on.
package marlowe

import (
	"math/big"
)

// MarloweData is the datum of a Marlowe semantics validator output.
type MarloweData struct {
	Params   MarloweParams
	State    State
	Contract Contract
}

// MarloweParams parametrises a contract. RolesCurrency is the minting policy of
// its role tokens: empty for contracts without roles, otherwise 28 bytes.
type MarloweParams struct {
	RolesCurrency []byte
}

// State is the contract state kept in the datum.
type State struct {
	Accounts    []AccountEntry
	Choices     []ChoiceEntry
	BoundValues []BoundValueEntry
	MinTime     *big.Int // POSIX milliseconds
}

// AccountEntry is one internal account balance: (party, token) -> amount.
type AccountEntry struct {
	Party  Party
	Token  Token
	Amount *big.Int
}

// ChoiceEntry is one recorded choice.
type ChoiceEntry struct {
	Choice ChoiceID
	Value  *big.Int
}

// BoundValueEntry is one value bound by Let.
type BoundValueEntry struct {
	Name  ValueID
	Value *big.Int
}

// Network is the network a Marlowe address party belongs to. On chain it is a
// Plutus Bool: testnet is False (constructor 0), mainnet is True (constructor 1).
type Network uint8

// Networks of address parties.
const (
	Testnet Network = 0
	Mainnet Network = 1
)

// Party is a participant: either an address (Address != nil) or the holder of
// a role token named Role.
type Party struct {
	Address *PartyAddress
	Role    []byte
}

// PartyAddress is an address party: a network and a full Plutus address.
type PartyAddress struct {
	Network Network
	Address Address
}

// Address is a Plutus address: a payment credential and an optional staking part.
type Address struct {
	Payment Credential
	Staking *StakingCredential // nil when the address has no staking part
}

// CredentialKind tells a key hash from a script hash.
type CredentialKind uint8

// Credential kinds, with their Plutus constructor indexes.
const (
	PubKeyCredential CredentialKind = 0
	ScriptCredential CredentialKind = 1
)

// Credential is a payment or staking credential.
type Credential struct {
	Kind CredentialKind
	Hash []byte // 28 bytes on chain
}

// StakingCredential is the staking part of an address: a credential hash or a
// pointer to a stake registration certificate.
type StakingCredential struct {
	// Pointer is nil for a staking hash (Hash is then set) and set for a pointer.
	Hash    Credential
	Pointer *StakePointer
}

// StakePointer locates a stake registration certificate on chain.
type StakePointer struct {
	Slot, TxIndex, CertIndex *big.Int
}

// Token is a native asset class; ada has an empty currency symbol and name.
type Token struct {
	Currency []byte
	Name     []byte
}

// ChoiceID names a choice and the party entitled to make it.
type ChoiceID struct {
	Name  []byte
	Owner Party
}

// ValueID names a value bound by Let.
type ValueID struct {
	Name []byte
}

// Bound is an inclusive range of acceptable choice numbers.
type Bound struct {
	From, To *big.Int
}

// PayeeKind tells a payment into an internal account from one to a party.
type PayeeKind uint8

// Payee kinds, with their Plutus constructor indexes.
const (
	PayeeAccount PayeeKind = 0
	PayeeParty   PayeeKind = 1
)

// Payee is the destination of a Pay.
type Payee struct {
	Kind  PayeeKind
	Party Party
}

// Contract is a Marlowe contract node: *Close, *Pay, *If, *When, *Let or *Assert.
type Contract interface{ isContract() }

// Close ends the contract, refunding every account to its owner.
type Close struct{}

// Pay moves Value of Token from an internal account to a payee, then continues.
type Pay struct {
	From  Party
	To    Payee
	Token Token
	Value Value
	Then  Contract
}

// If continues with Then when the observation is true, else with Else.
type If struct {
	Observation Observation
	Then        Contract
	Else        Contract
}

// When waits for one of its cases until Timeout (POSIX milliseconds).
type When struct {
	Cases               []Case
	Timeout             *big.Int
	TimeoutContinuation Contract
}

// Let binds a value to a name, then continues.
type Let struct {
	Name  ValueID
	Value Value
	Then  Contract
}

// Assert records a warning when the observation is false, then continues.
type Assert struct {
	Observation Observation
	Then        Contract
}

func (*Close) isContract()  {}
func (*Pay) isContract()    {}
func (*If) isContract()     {}
func (*When) isContract()   {}
func (*Let) isContract()    {}
func (*Assert) isContract() {}

// Case is one branch of a When. A plain case holds its continuation in Then;
// a merkleized case holds only the continuation's hash in MerkleizedThen
// (32 bytes: the datum hash of the continuation contract) and Then is nil.
type Case struct {
	Action         Action
	Then           Contract
	MerkleizedThen []byte
}

// Merkleized reports whether the case holds only its continuation's hash.
func (c *Case) Merkleized() bool { return c.Then == nil }

// Action is what a case waits for: *Deposit, *Choice or *Notify.
type Action interface{ isAction() }

// Deposit waits for From to deposit Amount of Token into IntoAccount.
type Deposit struct {
	IntoAccount Party
	From        Party
	Token       Token
	Amount      Value
}

// Choice waits for a choice within the bounds.
type Choice struct {
	Choice ChoiceID
	Bounds []Bound
}

// Notify waits for a notification while the observation holds.
type Notify struct {
	Observation Observation
}

func (*Deposit) isAction() {}
func (*Choice) isAction()  {}
func (*Notify) isAction()  {}

// Value is a Marlowe value expression.
type Value interface{ isValue() }

// AvailableMoney is the balance of Token in the internal account of Account.
type AvailableMoney struct {
	Account Party
	Token   Token
}

// Constant is an integer literal.
type Constant struct{ N *big.Int }

// NegValue is the negation of a value.
type NegValue struct{ Value Value }

// AddValue is the sum of two values.
type AddValue struct{ Left, Right Value }

// SubValue is the difference of two values.
type SubValue struct{ Left, Right Value }

// MulValue is the product of two values.
type MulValue struct{ Left, Right Value }

// DivValue is the quotient of two values, rounded towards zero.
type DivValue struct{ Left, Right Value }

// ChoiceValue is the number chosen for a choice.
type ChoiceValue struct{ Choice ChoiceID }

// TimeIntervalStart is the start of the transaction's validity interval.
type TimeIntervalStart struct{}

// TimeIntervalEnd is the end of the transaction's validity interval.
type TimeIntervalEnd struct{}

// UseValue is the value bound to a name by Let.
type UseValue struct{ Name ValueID }

// Cond is Then when the observation holds, else Else.
type Cond struct {
	Observation Observation
	Then, Else  Value
}

func (*AvailableMoney) isValue()    {}
func (*Constant) isValue()          {}
func (*NegValue) isValue()          {}
func (*AddValue) isValue()          {}
func (*SubValue) isValue()          {}
func (*MulValue) isValue()          {}
func (*DivValue) isValue()          {}
func (*ChoiceValue) isValue()       {}
func (*TimeIntervalStart) isValue() {}
func (*TimeIntervalEnd) isValue()   {}
func (*UseValue) isValue()          {}
func (*Cond) isValue()              {}

// Observation is a Marlowe boolean expression.
type Observation interface{ isObservation() }

// AndObs is true when both observations are.
type AndObs struct{ Left, Right Observation }

// OrObs is true when either observation is.
type OrObs struct{ Left, Right Observation }

// NotObs negates an observation.
type NotObs struct{ Observation Observation }

// ChoseSomething is true when a choice has been made.
type ChoseSomething struct{ Choice ChoiceID }

// ValueGE is Left >= Right.
type ValueGE struct{ Left, Right Value }

// ValueGT is Left > Right.
type ValueGT struct{ Left, Right Value }

// ValueLT is Left < Right.
type ValueLT struct{ Left, Right Value }

// ValueLE is Left <= Right.
type ValueLE struct{ Left, Right Value }

// ValueEQ is Left == Right.
type ValueEQ struct{ Left, Right Value }

// TrueObs is true.
type TrueObs struct{}

// FalseObs is false.
type FalseObs struct{}

func (*AndObs) isObservation()         {}
func (*OrObs) isObservation()          {}
func (*NotObs) isObservation()         {}
func (*ChoseSomething) isObservation() {}
func (*ValueGE) isObservation()        {}
func (*ValueGT) isObservation()        {}
func (*ValueLT) isObservation()        {}
func (*ValueLE) isObservation()        {}
func (*ValueEQ) isObservation()        {}
func (*TrueObs) isObservation()        {}
func (*FalseObs) isObservation()       {}

// InputContent is what a transaction input does: *IDeposit, *IChoice or *INotify.
type InputContent interface{ isInputContent() }

// IDeposit deposits Amount of Token from From into the account of IntoAccount.
type IDeposit struct {
	IntoAccount Party
	From        Party
	Token       Token
	Amount      *big.Int
}

// IChoice makes a choice.
type IChoice struct {
	Choice    ChoiceID
	ChosenNum *big.Int
}

// INotify notifies the contract.
type INotify struct{}

func (*IDeposit) isInputContent() {}
func (*IChoice) isInputContent()  {}
func (*INotify) isInputContent()  {}

// Input is one Marlowe input of a transaction. On chain (in the redeemer, a
// MarloweTxInput) a merkleized input carries its content and the hash of the
// continuation it unlocks; the continuation itself travels in the
// transaction's datum witnesses and is set in Continuation once resolved.
type Input struct {
	Content          InputContent
	ContinuationHash []byte   // nil for a plain input
	Continuation     Contract // the resolved continuation of a merkleized input, if known
}

// Merkleized reports whether the input unlocks a merkleized case.
func (in *Input) Merkleized() bool { return in.ContinuationHash != nil }

// Redeemer is the redeemer of a Marlowe semantics validator: a list of inputs.
type Redeemer []Input

// PayoutDatum is the datum of a role-payout validator output: the role token
// (roles currency and role name) that may withdraw it.
type PayoutDatum struct {
	RolesCurrency []byte
	Role          []byte
}

// TimeInterval is a transaction's validity interval in POSIX milliseconds,
// inclusive on both ends, as in the Marlowe semantics.
type TimeInterval struct {
	From, To *big.Int
}

// TransactionInput is a semantic transaction: an interval and its inputs.
type TransactionInput struct {
	Interval TimeInterval
	Inputs   []Input
}

// Shared instances of the field-less nodes, so that decoding does not allocate them.
var (
	closeContract     = &Close{}
	timeStart         = &TimeIntervalStart{}
	timeEnd           = &TimeIntervalEnd{}
	trueObservation   = &TrueObs{}
	falseObservation  = &FalseObs{}
	notifyInput       = &INotify{}
	emptyBytes        = []byte{}
	defaultMinTimeInt = big.NewInt(0)
)
