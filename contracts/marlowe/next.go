package marlowe

import (
	"errors"
	"math/big"
	"slices"
	"time"
)

// This file computes what can happen next to a contract, as the module
// Language.Marlowe.Core.V1.Next of marlowe-cardano does for the runtime's
// GET /contracts/{contractId}/next: whether the contract can be reduced
// without input, and which inputs apply to it, in a validity interval.
//
// The computation follows the reference step by step:
//
//   - The interval is fixed against the state (FixInterval); its errors are
//     the result.
//   - The contract is reduced until quiescent in the trimmed interval. A
//     When whose timeout falls inside the interval makes the reduction
//     ambiguous, which the reference reports as InvalidInterval with the
//     interval as requested (not TEAmbiguousTimeIntervalError). CanReduce
//     is whether that reduction did anything: a timed-out When, a Pay, If,
//     Let or Assert, or a Close with a positive balance left to refund.
//   - Only a quiescent When has applicable inputs; a Close has none. Its
//     cases are read in order, with their values and observations evaluated
//     in the reduced state but in the environment of the interval as
//     requested, not the trimmed one (the reference passes the original
//     environment on): TimeIntervalStart is the requested start even when
//     it is before the state's minTime.
//   - Notify: the first case whose observation is true, if any. A Notify
//     whose observation is false is not applicable, and later true ones are
//     shadowed by the first.
//   - Deposit: every deposit case with its amount evaluated, whatever the
//     amount's sign (the semantics accept a non-positive deposit, with a
//     warning), except a case identical to an earlier applicable one
//     (same account, party, token, evaluated amount and merkleization).
//     A case that differs from an earlier one only in merkleization stays,
//     though the semantics always take the earlier case for that input.
//   - Choice: a case's bounds less the bounds of the earlier applicable
//     choices with the same choice id, computed as the reference's set
//     difference of real intervals (package range), so the result is
//     sorted and bounds that overlap or share an end are merged, but
//     bounds that only adjoin as integers ([1,2] and [3,4]) stay apart. A bound
//     whose From is above its To is read as [To, From] there (the
//     semantics would match no number with it). A choice left with no
//     bound is not applicable.

// Next is what can happen next to a contract in a validity interval (Next of
// the reference): whether it can be reduced without input, and which inputs
// can be applied to it.
type Next struct {
	CanReduce        bool
	ApplicableInputs ApplicableInputs
}

// ApplicableInputs are the inputs a contract waiting in a When accepts, each
// with the case it goes through.
type ApplicableInputs struct {
	Notify   *CanNotify // the first case that accepts a notification, or nil
	Deposits []CanDeposit
	Choices  []CanChoose
}

// ApplicableCase is the case of the When that an applicable input goes
// through.
type ApplicableCase struct {
	CaseIndex int // the index of the case in When.Cases
	// Merkleized tells whether the case holds only its continuation's hash
	// (is_merkleized_continuation): the input must then carry the
	// continuation.
	Merkleized bool
	// ContinuationHash is the case's MerkleizedThen when Merkleized, else
	// nil. It is not part of the reference's result nor of its JSON.
	ContinuationHash []byte
}

// CanNotify is a notification the contract accepts.
type CanNotify struct {
	ApplicableCase
}

// CanDeposit is a deposit the contract accepts: From may deposit exactly
// Amount of Token into the account of IntoAccount.
type CanDeposit struct {
	IntoAccount Party
	From        Party // the depositor, "party" in the JSON
	Token       Token
	Amount      *big.Int
	ApplicableCase
}

// CanChoose is a choice the contract accepts: any number within one of
// Bounds, which are sorted and disjoint.
type CanChoose struct {
	Choice ChoiceID
	Bounds []Bound
	ApplicableCase
}

// EnvironmentFromTimes is the environment of the validity interval from
// validityStart to validityEnd (mkEnvironment of the reference): both times
// in POSIX milliseconds, truncated towards zero.
func EnvironmentFromTimes(validityStart, validityEnd time.Time) Environment {
	return Environment{TimeInterval: TimeInterval{From: posixMillis(validityStart), To: posixMillis(validityEnd)}}
}

// posixMillis is t in POSIX milliseconds, truncated towards zero.
func posixMillis(t time.Time) *big.Int {
	ms := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(1000))
	ns := int64(t.Nanosecond()) // in [0, 1e9): ms + ns/1e6 is the floor
	ms.Add(ms, big.NewInt(ns/1_000_000))
	if ms.Sign() < 0 && ns%1_000_000 != 0 {
		ms.Add(ms, big.NewInt(1)) // the floor of a negative time, truncated
	}
	return ms
}

// ComputeNext tells whether the contract c in state st can be reduced in
// the validity interval of env and which inputs it accepts there (next of
// the reference). env is the interval as requested, before FixInterval.
//
// The When accepts each applicable input alone in the same interval, and
// the semantics take the case it names, with three exceptions inherited
// from the reference: values and observations are evaluated with the
// interval as requested rather than trimmed to minTime, so a deposit
// amount or notify condition that uses TimeIntervalStart may differ from
// what the semantics compute when the interval starts before minTime; a
// reversed bound (From > To), which accepts no number, is reported as
// [To, From]; and a deposit case that repeats an earlier one with the
// other merkleization is listed, though the earlier case catches its
// input. (The transaction can still fail after the input, when the
// continuation reaches a timeout inside the interval: Next does not look
// past the When.)
//
// The error is an *IntervalError when the interval ends before it starts
// (InvalidInterval), ends before the state's minTime (IntervalInPastError),
// or contains the timeout of a When the contract reaches (InvalidInterval
// too, as the reference has it); otherwise it wraps ErrMalformed. Neither
// st nor c is modified.
func ComputeNext(env Environment, st State, c Contract) (n *Next, err error) {
	defer recoverMalformed(&err)
	trimmed, fixed, err := FixInterval(env.TimeInterval, st)
	if err != nil {
		return nil, err
	}
	red, err := ReduceContractUntilQuiescent(trimmed, fixed, c)
	if err != nil {
		var te *TransactionError
		if errors.As(err, &te) && te.Kind == TEAmbiguousTimeIntervalError {
			return nil, &IntervalError{Kind: InvalidInterval, Interval: env.TimeInterval}
		}
		return nil, err
	}
	n = &Next{CanReduce: red.Reduced}
	if w, ok := red.Contract.(*When); ok {
		n.ApplicableInputs = applicableInputs(newEvaluator(env, &red.State), w)
	}
	return n, nil
}

// applicableInputs reads the cases of a quiescent When. The evaluator only
// evaluates; it does not change its state.
func applicableInputs(e *evaluator, w *When) ApplicableInputs {
	var out ApplicableInputs
	for i := range w.Cases {
		cs := &w.Cases[i]
		ac := ApplicableCase{CaseIndex: i, Merkleized: cs.Merkleized()}
		if ac.Merkleized {
			ac.ContinuationHash = cs.MerkleizedThen
		}
		switch a := cs.Action.(type) {
		case *Notify:
			if e.observation(a.Observation) && out.Notify == nil {
				out.Notify = &CanNotify{ApplicableCase: ac}
			}
		case *Deposit:
			d := CanDeposit{IntoAccount: a.IntoAccount, From: a.From, Token: a.Token, Amount: e.value(a.Amount), ApplicableCase: ac}
			if !slices.ContainsFunc(out.Deposits, d.sameDeposit) {
				out.Deposits = append(out.Deposits, d)
			}
		case *Choice:
			var earlier []Bound
			for _, ch := range out.Choices {
				if choiceIDEqual(ch.Choice, a.Choice) {
					earlier = append(earlier, ch.Bounds...)
				}
			}
			if bounds := boundsDifference(a.Bounds, earlier); len(bounds) > 0 {
				out.Choices = append(out.Choices, CanChoose{Choice: a.Choice, Bounds: bounds, ApplicableCase: ac})
			}
		default:
			malformed("action %T in case %d", cs.Action, i)
		}
	}
	return out
}

// sameDeposit is the reference's equality of two applicable deposits: all
// but the case index (and the continuation hash, which it does not have).
func (d CanDeposit) sameDeposit(o CanDeposit) bool {
	return partyEqual(d.IntoAccount, o.IntoAccount) && partyEqual(d.From, o.From) && tokenEqual(d.Token, o.Token) &&
		d.Amount.Cmp(o.Amount) == 0 && d.Merkleized == o.Merkleized
}

// intSpan is a closed interval with integer ends, lo <= hi.
type intSpan struct{ lo, hi *big.Int }

// mergedSpans reads bounds as closed real intervals, a bound whose From is
// above its To as [To, From], and returns their union as sorted, disjoint
// closed intervals. Intervals that share a point are merged; [1,2] and
// [3,4] are not, as the real numbers between 2 and 3 are in neither.
func mergedSpans(bounds []Bound) []intSpan {
	spans := make([]intSpan, 0, len(bounds))
	for _, b := range bounds {
		lo, hi := need(b.From, "bound start"), need(b.To, "bound end")
		if lo.Cmp(hi) > 0 {
			lo, hi = hi, lo
		}
		spans = append(spans, intSpan{lo, hi})
	}
	slices.SortStableFunc(spans, func(a, b intSpan) int { return a.lo.Cmp(b.lo) })
	out := spans[:0]
	for _, s := range spans {
		if k := len(out) - 1; k >= 0 && s.lo.Cmp(out[k].hi) <= 0 {
			if s.hi.Cmp(out[k].hi) > 0 {
				out[k].hi = s.hi
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// boundsDifference is the difference of the reference's choice bounds
// (difference in Next/Applicables/Bound.hs): the union of xs less the
// union of ys, as sets of real numbers, one bound per connected piece of
// the result that holds an integer, from the piece's least integer to its
// greatest. The bounds are freshly allocated and sorted.
func boundsDifference(xs, ys []Bound) []Bound {
	remove := mergedSpans(ys)
	var out []Bound
	one := big.NewInt(1)
	for _, x := range mergedSpans(xs) {
		// pos is the least number of x not yet removed nor emitted; a
		// removed interval [lo, hi] leaves the open piece (hi, ...) whose
		// least integer is hi+1.
		pos := x.lo
		for _, r := range remove {
			if r.hi.Cmp(pos) < 0 {
				continue
			}
			if r.lo.Cmp(x.hi) > 0 {
				break
			}
			if r.lo.Cmp(pos) > 0 {
				out = append(out, Bound{From: pos, To: new(big.Int).Sub(r.lo, one)})
			}
			pos = new(big.Int).Add(r.hi, one)
			if pos.Cmp(x.hi) > 0 {
				break
			}
		}
		if pos.Cmp(x.hi) <= 0 {
			out = append(out, Bound{From: pos, To: x.hi})
		}
	}
	return out
}

// FilterByParties keeps the deposits made by one of the parties and the
// choices owned by one of them (filterByParties of the reference); the
// notification, which anyone may send, stays. With no party everything
// stays. The result is a new Next that shares its inputs' contents with n.
func (n *Next) FilterByParties(parties []Party) *Next {
	out := *n
	if len(parties) == 0 {
		return &out
	}
	among := func(p Party) bool {
		return slices.ContainsFunc(parties, func(q Party) bool { return partyEqual(p, q) })
	}
	out.ApplicableInputs.Deposits = nil
	for _, d := range n.ApplicableInputs.Deposits {
		if among(d.From) {
			out.ApplicableInputs.Deposits = append(out.ApplicableInputs.Deposits, d)
		}
	}
	out.ApplicableInputs.Choices = nil
	for _, c := range n.ApplicableInputs.Choices {
		if among(c.Choice.Owner) {
			out.ApplicableInputs.Choices = append(out.ApplicableInputs.Choices, c)
		}
	}
	return &out
}

// input returns an input with content through the case: a merkleized one
// carries the case's continuation hash, and its Continuation is left for
// the caller to resolve.
func (ac ApplicableCase) input(content InputContent) Input {
	in := Input{Content: content}
	if ac.Merkleized {
		in.ContinuationHash = ac.ContinuationHash
		if in.ContinuationHash == nil {
			in.ContinuationHash = []byte{}
		}
	}
	return in
}

// Input returns the notification input. For a merkleized case it carries
// the continuation hash; the caller sets Continuation.
func (n CanNotify) Input() Input { return n.input(notifyInput) }

// Input returns the deposit input. For a merkleized case it carries the
// continuation hash; the caller sets Continuation.
func (d CanDeposit) Input() Input {
	return d.input(&IDeposit{IntoAccount: d.IntoAccount, From: d.From, Token: d.Token, Amount: d.Amount})
}

// Input returns the input that chooses num, which should lie within one of
// the bounds. For a merkleized case it carries the continuation hash; the
// caller sets Continuation.
func (c CanChoose) Input(num *big.Int) Input {
	return c.input(&IChoice{Choice: c.Choice, ChosenNum: num})
}

// Inputs returns concrete inputs for the applicable inputs: the
// notification, each deposit, and each choice of the two ends of each of
// its bounds (one number when a bound holds only one). Each of them, alone
// in a transaction in the interval the inputs were computed for, is
// applied by the When, but for the exceptions ComputeNext describes.
func (a *ApplicableInputs) Inputs() []Input {
	var out []Input
	if a.Notify != nil {
		out = append(out, a.Notify.Input())
	}
	for _, d := range a.Deposits {
		out = append(out, d.Input())
	}
	for _, c := range a.Choices {
		for _, b := range c.Bounds {
			out = append(out, c.Input(b.From))
			if b.To.Cmp(b.From) != 0 {
				out = append(out, c.Input(b.To))
			}
		}
	}
	return out
}
