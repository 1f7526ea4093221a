package marlowe

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/big"
)

// evaluator runs the semantics in one environment over a private, mutable
// state, collecting warnings and payments in the order they are issued.
// Defects that make a value impossible to evaluate panic with a
// malformedPanic, which the exported functions recover.
type evaluator struct {
	env      Environment
	st       *State
	warnings []TransactionWarning
	payments []Payment
}

var bigZero = new(big.Int)

// newEvaluator checks the environment and returns an evaluator over st.
func newEvaluator(env Environment, st *State) *evaluator {
	need(env.TimeInterval.From, "interval start")
	need(env.TimeInterval.To, "interval end")
	if st == nil {
		malformed("nil state")
	}
	return &evaluator{env: env, st: st}
}

// need returns x, or reports a malformed value when it is nil.
func need(x *big.Int, what string) *big.Int {
	if x == nil {
		malformed("nil integer: %s", what)
	}
	return x
}

// cloneState copies the state's lists, so that the evaluator can change them
// in place, and checks that its integers are set.
func cloneState(st State) *State {
	need(st.MinTime, "state minTime")
	out := &State{
		Accounts:    append([]AccountEntry(nil), st.Accounts...),
		Choices:     append([]ChoiceEntry(nil), st.Choices...),
		BoundValues: append([]BoundValueEntry(nil), st.BoundValues...),
		MinTime:     st.MinTime,
	}
	for _, e := range out.Accounts {
		need(e.Amount, "account balance")
	}
	for _, e := range out.Choices {
		need(e.Value, "chosen number")
	}
	for _, e := range out.BoundValues {
		need(e.Value, "bound value")
	}
	return out
}

// Equality of the key types, as the reference's Eq instances define it.

func partyEqual(a, b Party) bool {
	if (a.Address == nil) != (b.Address == nil) {
		return false
	}
	if a.Address == nil {
		return bytes.Equal(a.Role, b.Role)
	}
	return a.Address.Network == b.Address.Network && addressEqual(a.Address.Address, b.Address.Address)
}

func addressEqual(a, b Address) bool {
	if !credentialEqual(a.Payment, b.Payment) || (a.Staking == nil) != (b.Staking == nil) {
		return false
	}
	if a.Staking == nil {
		return true
	}
	sa, sb := a.Staking, b.Staking
	if (sa.Pointer == nil) != (sb.Pointer == nil) {
		return false
	}
	if sa.Pointer == nil {
		return credentialEqual(sa.Hash, sb.Hash)
	}
	pa, pb := sa.Pointer, sb.Pointer
	return intEqual(pa.Slot, pb.Slot) && intEqual(pa.TxIndex, pb.TxIndex) && intEqual(pa.CertIndex, pb.CertIndex)
}

// intEqual compares integers that are nil when absent, as Plutus Data
// (ToData writes nil as 0) does.
func intEqual(a, b *big.Int) bool {
	if a == nil {
		a = bigZero
	}
	if b == nil {
		b = bigZero
	}
	return a.Cmp(b) == 0
}

func credentialEqual(a, b Credential) bool {
	return a.Kind == b.Kind && bytes.Equal(a.Hash, b.Hash)
}

func tokenEqual(a, b Token) bool {
	return bytes.Equal(a.Currency, b.Currency) && bytes.Equal(a.Name, b.Name)
}

func choiceIDEqual(a, b ChoiceID) bool {
	return bytes.Equal(a.Name, b.Name) && partyEqual(a.Owner, b.Owner)
}

func payeeEqual(a, b Payee) bool {
	return a.Kind == b.Kind && partyEqual(a.Party, b.Party)
}

// The state's association lists.

func (e *evaluator) accountIndex(acc Party, tok Token) int {
	for i := range e.st.Accounts {
		if a := &e.st.Accounts[i]; partyEqual(a.Party, acc) && tokenEqual(a.Token, tok) {
			return i
		}
	}
	return -1
}

// moneyInAccount is the balance of an account, 0 when it has none.
func (e *evaluator) moneyInAccount(acc Party, tok Token) *big.Int {
	if i := e.accountIndex(acc, tok); i >= 0 {
		return e.st.Accounts[i].Amount
	}
	return bigZero
}

// updateMoneyInAccount sets a balance; a non-positive balance deletes the
// account.
func (e *evaluator) updateMoneyInAccount(acc Party, tok Token, amount *big.Int) {
	i := e.accountIndex(acc, tok)
	switch {
	case amount.Sign() <= 0:
		if i >= 0 {
			e.st.Accounts = append(e.st.Accounts[:i:i], e.st.Accounts[i+1:]...)
		}
	case i >= 0:
		e.st.Accounts[i].Amount = amount
	default:
		e.st.Accounts = append(e.st.Accounts, AccountEntry{Party: acc, Token: tok, Amount: amount})
	}
}

// addMoneyToAccount adds a positive amount to a balance and ignores a
// non-positive one.
func (e *evaluator) addMoneyToAccount(acc Party, tok Token, amount *big.Int) {
	if amount.Sign() <= 0 {
		return
	}
	e.updateMoneyInAccount(acc, tok, new(big.Int).Add(e.moneyInAccount(acc, tok), amount))
}

func (e *evaluator) choiceIndex(ch ChoiceID) int {
	for i := range e.st.Choices {
		if choiceIDEqual(e.st.Choices[i].Choice, ch) {
			return i
		}
	}
	return -1
}

func (e *evaluator) boundIndex(name ValueID) int {
	for i := range e.st.BoundValues {
		if bytes.Equal(e.st.BoundValues[i].Name.Name, name.Name) {
			return i
		}
	}
	return -1
}

// Evaluation.

func (e *evaluator) value(v Value) *big.Int {
	switch x := v.(type) {
	case *AvailableMoney:
		return e.moneyInAccount(x.Account, x.Token)
	case *Constant:
		return need(x.N, "Constant")
	case *NegValue:
		return new(big.Int).Neg(e.value(x.Value))
	case *AddValue:
		l := e.value(x.Left)
		return new(big.Int).Add(l, e.value(x.Right))
	case *SubValue:
		l := e.value(x.Left)
		return new(big.Int).Sub(l, e.value(x.Right))
	case *MulValue:
		l := e.value(x.Left)
		return new(big.Int).Mul(l, e.value(x.Right))
	case *DivValue:
		// The reference does not need the numerator when dividing by zero.
		den := e.value(x.Right)
		if den.Sign() == 0 {
			return new(big.Int)
		}
		return new(big.Int).Quo(e.value(x.Left), den) // truncates towards zero, as quotientInteger
	case *ChoiceValue:
		if i := e.choiceIndex(x.Choice); i >= 0 {
			return e.st.Choices[i].Value
		}
		return new(big.Int)
	case *TimeIntervalStart:
		return e.env.TimeInterval.From
	case *TimeIntervalEnd:
		return e.env.TimeInterval.To
	case *UseValue:
		if i := e.boundIndex(x.Name); i >= 0 {
			return e.st.BoundValues[i].Value
		}
		return new(big.Int)
	case *Cond:
		if e.observation(x.Observation) {
			return e.value(x.Then)
		}
		return e.value(x.Else)
	}
	malformed("value %T", v)
	return nil
}

func (e *evaluator) observation(o Observation) bool {
	switch x := o.(type) {
	case *AndObs:
		return e.observation(x.Left) && e.observation(x.Right)
	case *OrObs:
		return e.observation(x.Left) || e.observation(x.Right)
	case *NotObs:
		return !e.observation(x.Observation)
	case *ChoseSomething:
		return e.choiceIndex(x.Choice) >= 0
	case *ValueGE:
		return e.compare(x.Left, x.Right) >= 0
	case *ValueGT:
		return e.compare(x.Left, x.Right) > 0
	case *ValueLT:
		return e.compare(x.Left, x.Right) < 0
	case *ValueLE:
		return e.compare(x.Left, x.Right) <= 0
	case *ValueEQ:
		return e.compare(x.Left, x.Right) == 0
	case *TrueObs:
		return true
	case *FalseObs:
		return false
	}
	malformed("observation %T", o)
	return false
}

func (e *evaluator) compare(l, r Value) int {
	lv := e.value(l)
	return lv.Cmp(e.value(r))
}

// Reduction.

func (e *evaluator) warn(w TransactionWarning) { e.warnings = append(e.warnings, w) }

// stepResult is the outcome of one reduction step.
type stepResult uint8

const (
	stepReduced stepResult = iota
	stepNotReduced
	stepAmbiguous
)

// reduceStep is reduceContractStep of the reference: one step of a contract
// that needs no input. It changes the state and records warnings and
// payments as it goes.
func (e *evaluator) reduceStep(c Contract) (Contract, stepResult) {
	switch x := c.(type) {
	case *Close:
		// refundOne: pay out the first account with a positive balance and
		// drop the non-positive accounts before it. When no balance is
		// positive nothing happens, and those accounts stay.
		for i, a := range e.st.Accounts {
			if a.Amount.Sign() > 0 {
				e.st.Accounts = e.st.Accounts[i+1:]
				e.payments = append(e.payments, Payment{From: a.Party, To: Payee{Kind: PayeeParty, Party: a.Party}, Token: a.Token, Amount: a.Amount})
				return c, stepReduced
			}
		}
		return c, stepNotReduced
	case *Pay:
		amount := e.value(x.Value)
		if amount.Sign() <= 0 {
			e.warn(&TransactionNonPositivePay{Account: x.From, Payee: x.To, Token: x.Token, Amount: amount})
			return continueWith(x.Then), stepReduced
		}
		balance := e.moneyInAccount(x.From, x.Token)
		paid := amount
		if balance.Cmp(amount) < 0 {
			paid = balance
		}
		e.updateMoneyInAccount(x.From, x.Token, new(big.Int).Sub(balance, paid))
		if paid.Cmp(amount) < 0 {
			e.warn(&TransactionPartialPay{Account: x.From, Payee: x.To, Token: x.Token, Paid: paid, Expected: amount})
		}
		// giveMoney
		if x.To.Kind == PayeeAccount {
			e.addMoneyToAccount(x.To.Party, x.Token, paid)
		}
		e.payments = append(e.payments, Payment{From: x.From, To: x.To, Token: x.Token, Amount: paid})
		return continueWith(x.Then), stepReduced
	case *If:
		if e.observation(x.Observation) {
			return continueWith(x.Then), stepReduced
		}
		return continueWith(x.Else), stepReduced
	case *When:
		timeout := need(x.Timeout, "When timeout")
		switch {
		case e.env.TimeInterval.To.Cmp(timeout) < 0:
			return c, stepNotReduced
		case timeout.Cmp(e.env.TimeInterval.From) <= 0:
			return continueWith(x.TimeoutContinuation), stepReduced
		}
		return c, stepAmbiguous
	case *Let:
		v := e.value(x.Value)
		if i := e.boundIndex(x.Name); i >= 0 {
			e.warn(&TransactionShadowing{Name: x.Name, OldValue: e.st.BoundValues[i].Value, NewValue: v})
			e.st.BoundValues[i].Value = v
		} else {
			e.st.BoundValues = append(e.st.BoundValues, BoundValueEntry{Name: x.Name, Value: v})
		}
		return continueWith(x.Then), stepReduced
	case *Assert:
		if !e.observation(x.Observation) {
			e.warn(&TransactionAssertionFailed{})
		}
		return continueWith(x.Then), stepReduced
	}
	malformed("contract %T", c)
	return nil, stepNotReduced
}

// continueWith returns a continuation, or reports a malformed contract when
// it is nil.
func continueWith(c Contract) Contract {
	if c == nil {
		malformed("nil continuation contract")
	}
	return c
}

// reduceUntilQuiescent is reduceContractUntilQuiescent of the reference.
func (e *evaluator) reduceUntilQuiescent(c Contract) (Contract, bool, *TransactionError) {
	reduced := false
	for {
		next, r := e.reduceStep(c)
		switch r {
		case stepNotReduced:
			return c, reduced, nil
		case stepAmbiguous:
			return nil, false, &TransactionError{Kind: TEAmbiguousTimeIntervalError, Input: -1,
				Detail: "a When's timeout falls inside the transaction's interval"}
		}
		reduced = true
		c = next
	}
}

// applyAction is applyAction of the reference: whether an input content
// satisfies an action. A matching deposit or choice changes the state.
func (e *evaluator) applyAction(content InputContent, action Action) bool {
	switch in := content.(type) {
	case *IDeposit:
		act, ok := action.(*Deposit)
		if !ok {
			return false
		}
		amount := need(in.Amount, "deposited amount")
		if !partyEqual(in.IntoAccount, act.IntoAccount) || !partyEqual(in.From, act.From) ||
			!tokenEqual(in.Token, act.Token) || amount.Cmp(e.value(act.Amount)) != 0 {
			return false
		}
		if amount.Sign() <= 0 {
			e.warn(&TransactionNonPositiveDeposit{Party: act.From, Account: act.IntoAccount, Token: act.Token, Amount: amount})
		}
		e.addMoneyToAccount(in.IntoAccount, in.Token, amount)
		return true
	case *IChoice:
		act, ok := action.(*Choice)
		if !ok {
			return false
		}
		num := need(in.ChosenNum, "chosen number")
		if !choiceIDEqual(in.Choice, act.Choice) || !inBounds(num, act.Bounds) {
			return false
		}
		if i := e.choiceIndex(in.Choice); i >= 0 {
			e.st.Choices[i].Value = num
		} else {
			e.st.Choices = append(e.st.Choices, ChoiceEntry{Choice: in.Choice, Value: num})
		}
		return true
	case *INotify:
		act, ok := action.(*Notify)
		return ok && e.observation(act.Observation)
	}
	malformed("input content %T", content)
	return false
}

// inBounds reports whether num lies in one of the inclusive bounds.
func inBounds(num *big.Int, bounds []Bound) bool {
	for _, b := range bounds {
		if num.Cmp(need(b.From, "bound start")) >= 0 && num.Cmp(need(b.To, "bound end")) <= 0 {
			return true
		}
	}
	return false
}

// continuation is getContinuation of the reference: the contract an input
// leads to through a case, or why it leads nowhere.
func continuation(in *Input, cs *Case) (Contract, string) {
	switch {
	case !in.Merkleized() && !cs.Merkleized():
		return cs.Then, ""
	case !in.Merkleized():
		return nil, "a plain input matched a merkleized case"
	case !cs.Merkleized():
		return nil, "a merkleized input matched a plain case"
	case !bytes.Equal(in.ContinuationHash, cs.MerkleizedThen):
		return nil, fmt.Sprintf("the input's continuation hash %x is not the case's %x", in.ContinuationHash, cs.MerkleizedThen)
	case in.Continuation == nil:
		return nil, fmt.Sprintf("the continuation with hash %x is not resolved", in.ContinuationHash)
	}
	if h := ContinuationHash(in.Continuation); !bytes.Equal(h[:], in.ContinuationHash) {
		return nil, "the input's continuation hashes to " + hex.EncodeToString(h[:]) + ", not to " + hex.EncodeToString(in.ContinuationHash)
	}
	return in.Continuation, ""
}

// applyInput is applyInput and applyCases of the reference: the first case
// of a When whose action the input satisfies decides the continuation.
func (e *evaluator) applyInput(in *Input, c Contract) (Contract, *TransactionError) {
	if in.Content == nil {
		malformed("nil input content")
	}
	if w, ok := c.(*When); ok {
		for i := range w.Cases {
			cs := &w.Cases[i]
			if cs.Action == nil {
				malformed("nil action in case %d", i)
			}
			if !e.applyAction(in.Content, cs.Action) {
				continue
			}
			next, why := continuation(in, cs)
			if next == nil {
				return nil, &TransactionError{Kind: TEHashMismatch, Detail: fmt.Sprintf("case %d: %s", i, why)}
			}
			return next, nil
		}
		return nil, &TransactionError{Kind: TEApplyNoMatchError, Detail: "no case of the When accepts the input"}
	}
	return nil, &TransactionError{Kind: TEApplyNoMatchError, Detail: fmt.Sprintf("the contract waits for no input (it is a %T)", c)}
}

// applyAllInputs is applyAllInputs of the reference. It reports whether the
// contract changed: whether an input was applied or a reduction happened.
func (e *evaluator) applyAllInputs(c Contract, inputs []Input) (Contract, bool, *TransactionError) {
	changed := false
	for i := 0; ; i++ {
		cont, reduced, err := e.reduceUntilQuiescent(c)
		if err != nil {
			return nil, false, err
		}
		changed = changed || reduced
		if i == len(inputs) {
			return cont, changed, nil
		}
		next, err := e.applyInput(&inputs[i], cont)
		if err != nil {
			err.Input = i
			return nil, false, err
		}
		c, changed = next, true
	}
}
