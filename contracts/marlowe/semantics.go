package marlowe

import (
	"errors"
	"fmt"
	"math/big"
)

// This file and semantics_eval.go implement the Marlowe Core V1 semantics of
// marlowe-cardano (marlowe/src/Language/Marlowe/Core/V1/Semantics.hs):
// computeTransaction and the functions it is built from. The results match
// the Haskell reference exactly, including the order of accounts, choices and
// bound values in the resulting state: the state's maps behave as the
// PlutusTx association lists of the reference (lookups find the leftmost
// entry, an insertion replaces the leftmost entry with the same key in place
// or appends a new entry at the end, a deletion removes the leftmost entry).
//
// Results may share *big.Int values and contract subtrees with the
// arguments; like everywhere in this package they are treated as immutable.
// The lists of the state in a TransactionOutput or ReduceResult are freshly
// allocated, and the caller's state is never modified.

// Payment is a payment made by a transaction: when a Pay runs, and when Close
// refunds an account to its owner. A payment to an internal account
// (To.Kind == PayeeAccount) moves money inside the contract; a payment to a
// party leaves it.
type Payment struct {
	From   Party // the internal account paid from
	To     Payee
	Token  Token
	Amount *big.Int
}

// TransactionWarning is a warning issued by a transaction: one of
// *TransactionNonPositiveDeposit, *TransactionNonPositivePay,
// *TransactionPartialPay, *TransactionShadowing or
// *TransactionAssertionFailed.
type TransactionWarning interface{ isTransactionWarning() }

// TransactionNonPositiveDeposit warns that a deposit of a non-positive amount
// was accepted; it did not change the account.
type TransactionNonPositiveDeposit struct {
	Party   Party // the party that deposits
	Account Party // the internal account deposited into
	Token   Token
	Amount  *big.Int
}

// TransactionNonPositivePay warns that a Pay asked for a non-positive amount;
// nothing was paid.
type TransactionNonPositivePay struct {
	Account Party // the internal account to pay from
	Payee   Payee
	Token   Token
	Amount  *big.Int
}

// TransactionPartialPay warns that a Pay asked for more than the account held;
// the whole balance, Paid, was paid instead of Expected.
type TransactionPartialPay struct {
	Account  Party // the internal account paid from
	Payee    Payee
	Token    Token
	Paid     *big.Int
	Expected *big.Int
}

// TransactionShadowing warns that a Let rebound a name that was already bound.
type TransactionShadowing struct {
	Name     ValueID
	OldValue *big.Int
	NewValue *big.Int
}

// TransactionAssertionFailed warns that the observation of an Assert was false.
type TransactionAssertionFailed struct{}

func (*TransactionNonPositiveDeposit) isTransactionWarning() {}
func (*TransactionNonPositivePay) isTransactionWarning()     {}
func (*TransactionPartialPay) isTransactionWarning()         {}
func (*TransactionShadowing) isTransactionWarning()          {}
func (*TransactionAssertionFailed) isTransactionWarning()    {}

// TransactionOutput is the result of a successful transaction: the warnings
// and payments it issued, in order, and the new state and contract.
type TransactionOutput struct {
	Warnings []TransactionWarning
	Payments []Payment
	State    State
	Contract Contract
}

// TransactionErrorKind tells the transaction errors of the reference apart.
// The names are the Haskell constructor names, which are also their JSON.
type TransactionErrorKind uint8

// Transaction errors.
const (
	// TEAmbiguousTimeIntervalError: a When's timeout falls inside the
	// transaction's interval, so whether it has passed is ambiguous.
	TEAmbiguousTimeIntervalError TransactionErrorKind = iota
	// TEApplyNoMatchError: an input matches no case of the contract, or the
	// contract does not wait for input.
	TEApplyNoMatchError
	// TEIntervalError: the transaction's interval is invalid or in the past;
	// TransactionError.IntervalError tells which.
	TEIntervalError
	// TEUselessTransaction: the transaction changes nothing.
	TEUselessTransaction
	// TEHashMismatch: an input's action matched a case but the input does not
	// provide that case's continuation: a plain input for a merkleized case,
	// a merkleized input for a plain case, a continuation hash different from
	// the case's, an unresolved continuation (Input.Continuation nil), or a
	// continuation whose ContinuationHash is not the input's hash.
	TEHashMismatch
)

var transactionErrorNames = [...]string{
	TEAmbiguousTimeIntervalError: "TEAmbiguousTimeIntervalError",
	TEApplyNoMatchError:          "TEApplyNoMatchError",
	TEIntervalError:              "TEIntervalError",
	TEUselessTransaction:         "TEUselessTransaction",
	TEHashMismatch:               "TEHashMismatch",
}

// String returns the Haskell constructor name of the kind.
func (k TransactionErrorKind) String() string {
	if int(k) < len(transactionErrorNames) {
		return transactionErrorNames[k]
	}
	return fmt.Sprintf("TransactionErrorKind(%d)", uint8(k))
}

// TransactionError is a transaction the semantics reject. Only Kind and, for
// TEIntervalError, IntervalError are part of the reference's result and of
// its JSON; Input and Detail help to diagnose errors computed here.
type TransactionError struct {
	Kind          TransactionErrorKind
	IntervalError *IntervalError // set exactly when Kind is TEIntervalError
	// Input is the index in TransactionInput.Inputs of the input that failed
	// to apply (TEApplyNoMatchError, TEHashMismatch), or -1.
	Input int
	// Detail explains the error in words; it may be empty.
	Detail string
}

// Error describes the error.
func (e *TransactionError) Error() string {
	msg := "marlowe: " + e.Kind.String()
	if e.Kind == TEIntervalError && e.IntervalError != nil {
		msg += ": " + e.IntervalError.Error()
	}
	if e.Input >= 0 {
		msg += fmt.Sprintf(" (input %d)", e.Input)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// IntervalErrorKind tells the two interval errors apart.
type IntervalErrorKind uint8

// Interval errors.
const (
	// InvalidInterval: the interval ends before it starts.
	InvalidInterval IntervalErrorKind = iota
	// IntervalInPastError: the interval ends before the state's minTime.
	IntervalInPastError
)

// IntervalError is a transaction interval the semantics reject.
type IntervalError struct {
	Kind     IntervalErrorKind
	MinTime  *big.Int // the state's minTime, for IntervalInPastError only
	Interval TimeInterval
}

// Error describes the error.
func (e *IntervalError) Error() string {
	if e.Kind == InvalidInterval {
		return fmt.Sprintf("invalid interval [%v, %v]", e.Interval.From, e.Interval.To)
	}
	return fmt.Sprintf("interval [%v, %v] is before the contract's minTime %v", e.Interval.From, e.Interval.To, e.MinTime)
}

// ErrMalformed is wrapped by the errors about values the semantics cannot
// evaluate at all because they are not well formed: a nil contract, value,
// observation, action or input content, or a nil integer. Decoded values
// never have these defects; only values built by hand can.
var ErrMalformed = errors.New("malformed Marlowe value")

// malformedPanic carries an ErrMalformed error from deep inside the
// evaluator to the exported function that recovers it.
type malformedPanic struct{ err error }

func malformed(format string, args ...any) {
	panic(malformedPanic{fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)})
}

// recoverMalformed turns a malformedPanic into *err. It must be deferred
// directly.
func recoverMalformed(err *error) {
	if r := recover(); r != nil {
		m, ok := r.(malformedPanic)
		if !ok {
			panic(r)
		}
		*err = m.err
	}
}

// Environment is what a transaction's contract is evaluated in: its time
// interval after FixInterval.
type Environment struct {
	TimeInterval TimeInterval
}

// EmptyState is the state of a new contract: no accounts, choices or bound
// values, and the given minTime.
func EmptyState(minTime *big.Int) State {
	return State{MinTime: minTime}
}

// FixInterval checks a transaction's interval against the state (fixInterval
// of the reference). The interval must not end before it starts
// (InvalidInterval) nor before the state's minTime (IntervalInPastError). On
// success the interval's start is raised to minTime if it was earlier, and
// the state's minTime becomes that start. The error is an *IntervalError or
// wraps ErrMalformed. The returned state shares its slices with st.
func FixInterval(interval TimeInterval, st State) (env Environment, fixed State, err error) {
	defer recoverMalformed(&err)
	low := need(interval.From, "interval start")
	high := need(interval.To, "interval end")
	minTime := need(st.MinTime, "state minTime")
	if high.Cmp(low) < 0 {
		return Environment{}, State{}, &IntervalError{Kind: InvalidInterval, Interval: interval}
	}
	if high.Cmp(minTime) < 0 {
		return Environment{}, State{}, &IntervalError{Kind: IntervalInPastError, MinTime: minTime, Interval: interval}
	}
	newLow := low
	if minTime.Cmp(low) > 0 {
		newLow = minTime
	}
	fixed = st
	fixed.MinTime = newLow
	return Environment{TimeInterval: TimeInterval{From: newLow, To: high}}, fixed, nil
}

// EvalValue evaluates a value (evalValue of the reference). Division rounds
// towards zero and division by zero gives 0; the value of a choice that was
// not made, of a name that is not bound and of a missing account is 0. The
// error only ever wraps ErrMalformed.
func EvalValue(env Environment, st *State, v Value) (result *big.Int, err error) {
	defer recoverMalformed(&err)
	e := newEvaluator(env, st)
	return e.value(v), nil
}

// EvalObservation evaluates an observation (evalObservation of the
// reference). The error only ever wraps ErrMalformed.
func EvalObservation(env Environment, st *State, o Observation) (result bool, err error) {
	defer recoverMalformed(&err)
	e := newEvaluator(env, st)
	return e.observation(o), nil
}

// ReduceResult is the result of reducing a contract without inputs: whether
// anything happened, the warnings and payments, and the new state and
// contract. The contract is quiescent: a Close with no account left to
// refund, or a When whose timeout has not passed.
type ReduceResult struct {
	Reduced  bool
	Warnings []TransactionWarning
	Payments []Payment
	State    State
	Contract Contract
}

// ReduceContractUntilQuiescent reduces a contract in an environment until it
// waits for input or is closed with every account refunded
// (reduceContractUntilQuiescent of the reference). The error is a
// *TransactionError of kind TEAmbiguousTimeIntervalError when a When's
// timeout falls inside the interval, or wraps ErrMalformed.
func ReduceContractUntilQuiescent(env Environment, st State, c Contract) (res *ReduceResult, err error) {
	defer recoverMalformed(&err)
	e := newEvaluator(env, cloneState(st))
	cont, reduced, terr := e.reduceUntilQuiescent(c)
	if terr != nil {
		return nil, terr
	}
	return &ReduceResult{Reduced: reduced, Warnings: e.warnings, Payments: e.payments, State: *e.st, Contract: cont}, nil
}

// Reduce fixes the interval against the state and reduces the contract
// without inputs: what a transaction with no inputs in that interval would
// do, for example the payments a Close reached by a timeout makes. Unlike
// ComputeTransaction it does not reject a transaction that changes nothing;
// Reduced tells whether anything happened. The error is a *TransactionError
// (TEIntervalError or TEAmbiguousTimeIntervalError) or wraps ErrMalformed.
func Reduce(interval TimeInterval, st State, c Contract) (*ReduceResult, error) {
	env, fixed, err := FixInterval(interval, st)
	if err != nil {
		return nil, intervalFailure(err)
	}
	return ReduceContractUntilQuiescent(env, fixed, c)
}

// intervalFailure wraps an *IntervalError from FixInterval in a
// *TransactionError and passes other errors through.
func intervalFailure(err error) error {
	var ie *IntervalError
	if errors.As(err, &ie) {
		return &TransactionError{Kind: TEIntervalError, IntervalError: ie, Input: -1}
	}
	return err
}

// ComputeTransaction applies a transaction to a contract in a state
// (computeTransaction of the reference): it fixes the interval, then reduces
// the contract and applies the inputs one by one, reducing again after each.
// A transaction that applies no input, reduces nothing and does not close a
// contract with accounts is rejected as useless.
//
// The error is a *TransactionError for every rejection of the reference, or
// wraps ErrMalformed when st or c cannot be evaluated at all. Neither st nor
// c is modified.
func ComputeTransaction(tx TransactionInput, st State, c Contract) (out *TransactionOutput, err error) {
	defer recoverMalformed(&err)
	env, fixed, err := FixInterval(tx.Interval, st)
	if err != nil {
		return nil, intervalFailure(err)
	}
	e := newEvaluator(env, cloneState(fixed))
	cont, changed, terr := e.applyAllInputs(c, tx.Inputs)
	if terr != nil {
		return nil, terr
	}
	if _, isClose := c.(*Close); !changed && (!isClose || len(st.Accounts) == 0) {
		return nil, &TransactionError{Kind: TEUselessTransaction, Input: -1,
			Detail: "the transaction applies no input and reduces nothing"}
	}
	return &TransactionOutput{Warnings: e.warnings, Payments: e.payments, State: *e.st, Contract: cont}, nil
}

// PlayTrace runs transactions one after the other from a contract and an
// empty state with the given minTime (playTrace of the reference). The
// output has the warnings and payments of all transactions, in order, and
// the final state and contract. It stops at the first error.
func PlayTrace(minTime *big.Int, c Contract, txs []TransactionInput) (*TransactionOutput, error) {
	acc := &TransactionOutput{State: EmptyState(minTime), Contract: c}
	for i, tx := range txs {
		out, err := ComputeTransaction(tx, acc.State, acc.Contract)
		if err != nil {
			return nil, fmt.Errorf("transaction %d: %w", i, err)
		}
		acc.Warnings = append(acc.Warnings, out.Warnings...)
		acc.Payments = append(acc.Payments, out.Payments...)
		acc.State, acc.Contract = out.State, out.Contract
	}
	return acc, nil
}
