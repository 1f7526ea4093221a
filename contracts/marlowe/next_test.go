package marlowe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

// Helpers shared by the Next tests.

func choiceID(name string, owner Party) ChoiceID { return ChoiceID{Name: []byte(name), Owner: owner} }

func bounds(pairs ...int64) []Bound {
	var out []Bound
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Bound{From: bi(pairs[i]), To: bi(pairs[i+1])})
	}
	return out
}

func plainCase(a Action) Case { return Case{Action: a, Then: &Close{}} }

func merkleizedCase(a Action, cont Contract) Case {
	h := ContinuationHash(cont)
	return Case{Action: a, MerkleizedThen: h[:]}
}

func mustNext(t *testing.T, iv TimeInterval, st State, c Contract) *Next {
	t.Helper()
	n, err := ComputeNext(Environment{TimeInterval: iv}, st, c)
	if err != nil {
		t.Fatalf("ComputeNext: %v", err)
	}
	return n
}

func boundsText(bs []Bound) string {
	s := ""
	for _, b := range bs {
		s += fmt.Sprintf("[%v,%v]", b.From, b.To)
	}
	return s
}

// firstMatchingCase is the index of the case of w whose action the
// semantics would apply content to (applyCases of the reference), or -1.
// env is the trimmed environment and st the state after reduction.
func firstMatchingCase(env Environment, st State, w *When, content InputContent) int {
	for i := range w.Cases {
		if newEvaluator(env, cloneState(st)).applyAction(content, w.Cases[i].Action) {
			return i
		}
	}
	return -1
}

// findApplicable is the applicable input of n that content goes through:
// the first deposit with the same fields and amount, the first choice with
// the same choice id and a bound holding the number, or the notification.
func findApplicable(n *Next, content InputContent) (ApplicableCase, bool) {
	a := &n.ApplicableInputs
	switch x := content.(type) {
	case *IDeposit:
		for _, d := range a.Deposits {
			if partyEqual(d.IntoAccount, x.IntoAccount) && partyEqual(d.From, x.From) && tokenEqual(d.Token, x.Token) && d.Amount.Cmp(x.Amount) == 0 {
				return d.ApplicableCase, true
			}
		}
	case *IChoice:
		for _, c := range a.Choices {
			if choiceIDEqual(c.Choice, x.Choice) && inBounds(x.ChosenNum, c.Bounds) {
				return c.ApplicableCase, true
			}
		}
	case *INotify:
		if a.Notify != nil {
			return a.Notify.ApplicableCase, true
		}
	}
	return ApplicableCase{}, false
}

// inputParty is the party entitled to an input: the depositor or the
// choice's owner; nil for a notification, which anyone may send.
func inputParty(content InputContent) *Party {
	switch x := content.(type) {
	case *IDeposit:
		return &x.From
	case *IChoice:
		return &x.Choice.Owner
	}
	return nil
}

// checkAccepted checks that the input in, which the semantics apply
// through case i of the quiescent When w, is an applicable input of n
// through that same case, and stays one when n is filtered by its party.
func checkAccepted(t *testing.T, where string, n *Next, w *When, i int, in Input) {
	t.Helper()
	ac, ok := findApplicable(n, in.Content)
	if !ok {
		t.Fatalf("%s: input %s is not among the applicable inputs %s", where, mustJSON(t, &in), mustJSON(t, n))
	}
	cs := &w.Cases[i]
	if ac.CaseIndex != i || ac.Merkleized != cs.Merkleized() || !bytes.Equal(ac.ContinuationHash, cs.MerkleizedThen) {
		t.Fatalf("%s: input %s goes through case %d (merkleized %v), Next says %+v", where, mustJSON(t, &in), i, cs.Merkleized(), ac)
	}
	if in.Merkleized() != ac.Merkleized {
		t.Fatalf("%s: the input's merkleization does not match the applicable case's", where)
	}
	if p := inputParty(in.Content); p != nil {
		f := n.FilterByParties([]Party{*p})
		if _, ok := findApplicable(f, in.Content); !ok {
			t.Fatalf("%s: input %s is lost when filtering by its party", where, mustJSON(t, &in))
		}
	}
}

// canReduceByTransaction tells whether a transaction without inputs in the
// interval is accepted, which is what CanReduce means.
func canReduceByTransaction(t *testing.T, iv TimeInterval, st State, c Contract) bool {
	t.Helper()
	_, err := ComputeTransaction(TransactionInput{Interval: iv}, st, c)
	var te *TransactionError
	if err != nil && (!errors.As(err, &te) || te.Kind != TEUselessTransaction) {
		t.Fatalf("a transaction without inputs: %v", err)
	}
	return err == nil
}

// TestNextReferenceTraces computes Next before every input of every
// transaction of marlowe-cardano's reference traces: the input the trace
// applies next must be applicable, through the case the semantics take,
// and stay so when filtered by its party. Before a transaction without
// inputs (a timeout, or a Close refunding accounts) the contract must be
// reducible. At the end of each path Next must agree with a transaction
// without inputs about reducibility.
func TestNextReferenceTraces(t *testing.T) {
	counts := map[string]int{}
	for _, f := range referenceTraces(t) {
		for i, p := range readJSONFile[[]semanticsPath](t, f) {
			c := must(t, ParseContractJSON, []byte(p.Contract))
			st := *must(t, ParseStateJSON, []byte(p.State))
			var last TimeInterval
			for j, tr := range p.Transactions {
				tin := must(t, ParseTransactionInputJSON, []byte(tr.Input))
				iv := tin.Interval
				last = iv
				env, _, err := FixInterval(iv, st)
				if err != nil {
					t.Fatal(err)
				}
				curSt, curC := st, c
				for k := 0; k <= len(tin.Inputs); k++ {
					where := fmt.Sprintf("%s path %d tx %d input %d", filepath.Base(f), i, j, k)
					n, err := ComputeNext(Environment{TimeInterval: iv}, curSt, curC)
					if err != nil {
						t.Fatalf("%s: %v", where, err)
					}
					if got := canReduceByTransaction(t, iv, curSt, curC); got != n.CanReduce {
						t.Fatalf("%s: CanReduce %v, a transaction without inputs says %v", where, n.CanReduce, got)
					}
					if len(tin.Inputs) == 0 {
						if !n.CanReduce {
							t.Fatalf("%s: a transaction without inputs succeeded but Next cannot reduce", where)
						}
						counts["reductions"]++
						break
					}
					if k == len(tin.Inputs) {
						break
					}
					in := tin.Inputs[k]
					red, err := Reduce(iv, curSt, curC)
					if err != nil {
						t.Fatal(err)
					}
					w, ok := red.Contract.(*When)
					if !ok {
						t.Fatalf("%s: the input meets a %T", where, red.Contract)
					}
					ci := firstMatchingCase(env, red.State, w, in.Content)
					if ci < 0 {
						t.Fatalf("%s: no case accepts the trace's input", where)
					}
					checkAccepted(t, where, n, w, ci, in)
					counts[fmt.Sprintf("%T", in.Content)]++
					out, err := ComputeTransaction(TransactionInput{Interval: iv, Inputs: tin.Inputs[:k+1]}, st, c)
					if err != nil {
						t.Fatalf("%s: %v", where, err)
					}
					curSt, curC = out.State, out.Contract
				}
				out, err := ComputeTransaction(*tin, st, c)
				if err != nil {
					t.Fatal(err)
				}
				st, c = out.State, out.Contract
				counts["transactions"]++
			}
			// The end of the path, in the interval of its last transaction.
			n := mustNext(t, last, st, c)
			if got := canReduceByTransaction(t, last, st, c); got != n.CanReduce {
				t.Fatalf("%s path %d end: CanReduce %v, a transaction says %v", f, i, n.CanReduce, got)
			}
			if isClose(c) {
				if len(n.ApplicableInputs.Inputs()) != 0 {
					t.Fatalf("%s path %d: a closed contract has applicable inputs", f, i)
				}
				counts["closed"]++
			}
		}
	}
	t.Logf("checked %v", counts)
	if counts["transactions"] != 493 || counts["*marlowe.IDeposit"] < 100 || counts["*marlowe.IChoice"] < 50 ||
		counts["*marlowe.INotify"] == 0 || counts["reductions"] < 100 || counts["closed"] == 0 {
		t.Fatalf("too little checked: %v", counts)
	}
}

// The generator of the property test: contracts that reduce a little and
// then wait in a When whose cases collide on purpose: repeated deposits,
// choices on few ids with overlapping, touching and empty bounds, and
// several notifications.

type nextGen struct {
	*semGen
	reversed bool // whether a bound may have From > To
}

func (g *nextGen) amount() Value {
	switch g.r.IntN(8) {
	case 0:
		return &TimeIntervalStart{}
	case 1:
		return &TimeIntervalEnd{}
	case 2:
		return &UseValue{Name: g.name()}
	case 3:
		return &AvailableMoney{Account: g.party(), Token: g.token()}
	case 4:
		return g.value(2)
	}
	return cst(g.r.Int64N(5) - 1)
}

func (g *nextGen) bounds() []Bound {
	var out []Bound
	for n := g.r.IntN(4); n > 0; n-- {
		lo := g.r.Int64N(10) - 3
		hi := lo + g.r.Int64N(4)
		if g.reversed && g.r.IntN(4) == 0 {
			lo, hi = hi+1, lo
		}
		out = append(out, Bound{From: bi(lo), To: bi(hi)})
	}
	return out
}

func (g *nextGen) notifyObservation() Observation {
	switch g.r.IntN(4) {
	case 0:
		return &TrueObs{}
	case 1:
		return &FalseObs{}
	}
	return g.observation(2)
}

func (g *nextGen) when(now int64) *When {
	w := &When{Timeout: bi(now + 20 + g.r.Int64N(60)), TimeoutContinuation: g.contract(2, now+80)}
	var actions []Action
	for n := g.r.IntN(7) + 1; n > 0; n-- {
		var a Action
		switch k := g.r.IntN(7); {
		case k == 0 && len(actions) > 0:
			a = actions[g.r.IntN(len(actions))] // the same action again
		case k <= 2:
			a = &Deposit{IntoAccount: g.party(), From: g.party(), Token: g.token(), Amount: g.amount()}
		case k <= 4:
			a = &Choice{Choice: g.choices[g.r.IntN(2)], Bounds: g.bounds()}
		default:
			a = &Notify{Observation: g.notifyObservation()}
		}
		actions = append(actions, a)
		g.addCase(w, a, g.contract(2, now+80))
	}
	return w
}

// nextContract is a When behind a few steps that reduce: Lets, Ifs,
// Asserts, Pays and Whens that may have timed out.
func (g *nextGen) nextContract(now int64) Contract {
	var c Contract = g.when(now)
	for n := g.r.IntN(3); n > 0; n-- {
		switch g.r.IntN(5) {
		case 0:
			c = &Let{Name: g.name(), Value: g.value(2), Then: c}
		case 1:
			if g.r.IntN(2) == 0 {
				c = &If{Observation: g.observation(1), Then: c, Else: g.when(now)}
			} else {
				c = &If{Observation: g.observation(1), Then: g.when(now), Else: c}
			}
		case 2:
			c = &Assert{Observation: g.observation(1), Then: c}
		case 3:
			c = &Pay{From: g.party(), To: Payee{Kind: PayeeKind(g.r.IntN(2)), Party: g.party()}, Token: g.token(), Value: g.value(1), Then: c}
		default:
			// A When that may time out before the interval: its timeout
			// continuation is c.
			c = &When{Cases: g.when(now).Cases, Timeout: bi(now - 20 + g.r.Int64N(40)), TimeoutContinuation: c}
		}
	}
	return c
}

func (g *nextGen) nextState(minTime int64) State {
	st := g.state(minTime)
	for _, ch := range g.choices {
		if g.r.IntN(3) == 0 {
			st.Choices = append(st.Choices, ChoiceEntry{Choice: ch, Value: bi(g.small())})
		}
	}
	for _, nm := range g.names {
		if g.r.IntN(3) == 0 {
			st.BoundValues = append(st.BoundValues, BoundValueEntry{Name: nm, Value: bi(g.small())})
		}
	}
	return st
}

// mentionsTimeStart reports whether an action reads TimeIntervalStart.
func mentionsTimeStart(a Action) bool {
	var value func(Value) bool
	var obs func(Observation) bool
	value = func(v Value) bool {
		if l, r, ok := ValueOperands(v); ok {
			return value(l) || value(r)
		}
		switch x := v.(type) {
		case *TimeIntervalStart:
			return true
		case *NegValue:
			return value(x.Value)
		case *Cond:
			return obs(x.Observation) || value(x.Then) || value(x.Else)
		}
		return false
	}
	obs = func(o Observation) bool {
		if l, r, ok := ValueOperands(o); ok {
			return value(l) || value(r)
		}
		switch x := o.(type) {
		case *AndObs:
			return obs(x.Left) || obs(x.Right)
		case *OrObs:
			return obs(x.Left) || obs(x.Right)
		case *NotObs:
			return obs(x.Observation)
		}
		return false
	}
	switch x := a.(type) {
	case *Deposit:
		return value(x.Amount)
	case *Notify:
		return obs(x.Observation)
	}
	return false
}

func hasReversedBound(w *When) bool {
	for _, cs := range w.Cases {
		if ch, ok := cs.Action.(*Choice); ok {
			for _, b := range ch.Bounds {
				if b.From.Cmp(b.To) > 0 {
					return true
				}
			}
		}
	}
	return false
}

// candidateContents are inputs to try on w: the deposits of its cases with
// their amounts and amounts one off, every number from -6 to 10 for each
// of the generator's choice ids, and a notification.
func candidateContents(g *nextGen, env Environment, st State, w *When) []InputContent {
	out := []InputContent{notifyInput}
	for _, cs := range w.Cases {
		if d, ok := cs.Action.(*Deposit); ok {
			amount, err := EvalValue(env, &st, d.Amount)
			if err != nil {
				panic(err)
			}
			for _, delta := range []int64{-1, 0, 1} {
				out = append(out, &IDeposit{IntoAccount: d.IntoAccount, From: d.From, Token: d.Token, Amount: new(big.Int).Add(amount, bi(delta))})
			}
		}
	}
	for _, ch := range g.choices {
		for n := int64(-6); n <= 10; n++ {
			out = append(out, &IChoice{Choice: ch, ChosenNum: bi(n)})
		}
	}
	return out
}

// checkNextInvariants checks the shape of a result: case indexes increase,
// deposits are unique, bounds are sorted, disjoint and not empty, and the
// bounds of one choice id do not overlap across cases.
func checkNextInvariants(t *testing.T, where string, n *Next, w *When) {
	t.Helper()
	a := &n.ApplicableInputs
	if a.Notify != nil {
		if _, ok := w.Cases[a.Notify.CaseIndex].Action.(*Notify); !ok {
			t.Fatalf("%s: notify through a case that is no Notify", where)
		}
	}
	for i, d := range a.Deposits {
		if _, ok := w.Cases[d.CaseIndex].Action.(*Deposit); !ok || (i > 0 && d.CaseIndex <= a.Deposits[i-1].CaseIndex) {
			t.Fatalf("%s: deposit case indexes %+v", where, a.Deposits)
		}
		for _, e := range a.Deposits[:i] {
			if d.sameDeposit(e) {
				t.Fatalf("%s: duplicate deposit", where)
			}
		}
	}
	seen := map[string][]Bound{}
	for i, c := range a.Choices {
		if _, ok := w.Cases[c.CaseIndex].Action.(*Choice); !ok || (i > 0 && c.CaseIndex <= a.Choices[i-1].CaseIndex) {
			t.Fatalf("%s: choice case indexes", where)
		}
		if len(c.Bounds) == 0 {
			t.Fatalf("%s: a choice without bounds", where)
		}
		for k, b := range c.Bounds {
			if b.From.Cmp(b.To) > 0 || (k > 0 && c.Bounds[k-1].To.Cmp(b.From) >= 0) {
				t.Fatalf("%s: bounds %s", where, boundsText(c.Bounds))
			}
		}
		key := mustJSON(t, c.Choice.Owner) + string(c.Choice.Name)
		for _, b := range c.Bounds {
			for _, e := range seen[key] {
				if b.From.Cmp(e.To) <= 0 && e.From.Cmp(b.To) <= 0 {
					t.Fatalf("%s: bounds of one choice id overlap across cases", where)
				}
			}
		}
		seen[key] = append(seen[key], c.Bounds...)
	}
}

// TestNextProperties computes Next for random contracts, states and
// intervals and checks it against the semantics:
//   - an interval error or an ambiguous interval is reported as the
//     reference does, and CanReduce is whether a transaction without inputs
//     would be accepted;
//   - every input Inputs builds, alone in a transaction in the interval
//     (with its continuation when merkleized), is accepted by
//     ComputeTransaction, and the semantics apply it through the case
//     Next names;
//   - conversely, of many candidate inputs, exactly those the semantics
//     would accept are applicable, each through the case the semantics
//     take;
//   - filtering by parties keeps exactly the deposits and choices of those
//     parties and the notification;
//   - the JSON has the shape of the schema "Next".
//
// Results are then followed: one applicable input is applied and Next
// computed again on what it leaves. Where the reference itself parts
// from the semantics (an interval starting before minTime with an action
// reading TimeIntervalStart, or a reversed bound) only the other checks
// run; TestNextReferenceQuirks shows those cases.
func TestNextProperties(t *testing.T) {
	g := &nextGen{semGen: newSemGen(t, 3)}
	counts := map[string]int{}
	for iter := 0; iter < 1500; iter++ {
		g.reversed = iter%5 == 4
		now := int64(1000)
		c := g.nextContract(now)
		st := g.nextState(now)
		for step := 0; step < 4; step++ {
			where := fmt.Sprintf("iteration %d step %d", iter, step)
			from := now + g.r.Int64N(60) - 20
			iv := span(from, from+g.r.Int64N(40)-2)
			n, err := ComputeNext(Environment{TimeInterval: iv}, st, c)
			red, rerr := Reduce(iv, st, c)
			if rerr != nil {
				var te *TransactionError
				if !errors.As(rerr, &te) {
					t.Fatal(rerr)
				}
				var ie *IntervalError
				if !errors.As(err, &ie) {
					t.Fatalf("%s: Reduce says %v, ComputeNext %v", where, rerr, err)
				}
				switch te.Kind {
				case TEIntervalError:
					if mustJSON(t, ie) != mustJSON(t, te.IntervalError) {
						t.Fatalf("%s: %v, want %v", where, ie, te.IntervalError)
					}
					counts["interval error"]++
				case TEAmbiguousTimeIntervalError:
					if ie.Kind != InvalidInterval || ie.Interval.From.Cmp(iv.From) != 0 || ie.Interval.To.Cmp(iv.To) != 0 {
						t.Fatalf("%s: ambiguous interval reported as %v", where, ie)
					}
					counts["ambiguous"]++
				default:
					t.Fatalf("%s: %v", where, rerr)
				}
				now += 5
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if got := canReduceByTransaction(t, iv, st, c); got != n.CanReduce {
				t.Fatalf("%s: CanReduce %v, a transaction says %v", where, n.CanReduce, got)
			}
			checkNextSchema(t, where, n)
			w, waiting := red.Contract.(*When)
			if !waiting {
				if len(n.ApplicableInputs.Inputs()) != 0 {
					t.Fatalf("%s: a closed contract has applicable inputs", where)
				}
				counts["closed"]++
				break
			}
			checkNextInvariants(t, where, n, w)
			env, _, _ := FixInterval(iv, st)
			exact := !hasReversedBound(w)
			if iv.From.Cmp(st.MinTime) < 0 {
				for _, cs := range w.Cases {
					exact = exact && !mentionsTimeStart(cs.Action)
				}
			}
			if !exact {
				counts["inexact"]++
			}
			// Every applicable input is accepted: the When applies it, and
			// the transaction succeeds unless what follows the input has a
			// timeout inside the interval, which Next does not look at.
			inputs := n.ApplicableInputs.Inputs()
			for k, in := range inputs {
				ac, _ := findApplicable(n, in.Content)
				if in.Merkleized() {
					var h [32]byte
					copy(h[:], in.ContinuationHash)
					in.Continuation = g.conts[h]
				}
				_, applyErr := newEvaluator(env, cloneState(red.State)).applyInput(&in, w)
				_, err := ComputeTransaction(TransactionInput{Interval: iv, Inputs: []Input{in}}, st, c)
				ci := firstMatchingCase(env, red.State, w, in.Content)
				if !exact {
					continue
				}
				if in.Merkleized() != ac.Merkleized {
					// A deposit that an earlier case with the same action but
					// the other merkleization catches.
					if _, ok := in.Content.(*IDeposit); !ok || applyErr == nil || applyErr.Kind != TEHashMismatch {
						t.Fatalf("%s: input %d %s: %v", where, k, mustJSON(t, &in), applyErr)
					}
					counts["merkleization shadowed"]++
					continue
				}
				if applyErr != nil {
					t.Fatalf("%s: applicable input %d %s rejected: %v\ncontract %s\nnext %s", where, k, mustJSON(t, &in), applyErr, contractText(c), mustJSON(t, n))
				}
				var te *TransactionError
				switch {
				case err == nil:
					counts[fmt.Sprintf("accepted %T", in.Content)]++
				case errors.As(err, &te) && te.Kind == TEAmbiguousTimeIntervalError:
					counts["ambiguous after the input"]++
				default:
					t.Fatalf("%s: the transaction of applicable input %d %s fails: %v", where, k, mustJSON(t, &in), err)
				}
				if ci != ac.CaseIndex {
					t.Fatalf("%s: input %s goes through case %d, Next says %d", where, mustJSON(t, &in), ci, ac.CaseIndex)
				}
			}
			// Exactly the inputs the semantics accept are applicable.
			if exact {
				for _, content := range candidateContents(g, env, red.State, w) {
					ci := firstMatchingCase(env, red.State, w, content)
					in := Input{Content: content}
					if ci < 0 {
						if ac, ok := findApplicable(n, content); ok {
							t.Fatalf("%s: %s is applicable through case %d but no case accepts it\ncontract %s\nnext %s", where, mustJSON(t, &in), ac.CaseIndex, contractText(w), mustJSON(t, n))
						}
						counts["refused"]++
						continue
					}
					if w.Cases[ci].Merkleized() {
						in.ContinuationHash = w.Cases[ci].MerkleizedThen
					}
					checkAccepted(t, where, n, w, ci, in)
					counts["matched"]++
				}
			}
			// Filtering.
			parties := slices.DeleteFunc(slices.Clone(g.parties), func(Party) bool { return g.r.IntN(2) == 0 })
			checkFilter(t, where, n, parties)
			// Follow one applicable input, or let time pass.
			if len(inputs) == 0 || g.r.IntN(5) == 0 {
				now += 30
				continue
			}
			in := inputs[g.r.IntN(len(inputs))]
			if in.Merkleized() {
				var h [32]byte
				copy(h[:], in.ContinuationHash)
				in.Continuation = g.conts[h]
			}
			out, err := ComputeTransaction(TransactionInput{Interval: iv, Inputs: []Input{in}}, st, c)
			if err != nil {
				now += 30
				continue
			}
			st, c = out.State, out.Contract
			now = st.MinTime.Int64()
			counts["followed"]++
		}
	}
	t.Logf("checked %v", counts)
	for _, k := range []string{"interval error", "ambiguous", "closed", "inexact", "refused", "matched", "followed",
		"accepted *marlowe.IDeposit", "accepted *marlowe.IChoice", "accepted *marlowe.INotify"} {
		if counts[k] < 20 {
			t.Fatalf("the generator exercised too little %q: %v", k, counts)
		}
	}
}

// checkFilter checks FilterByParties against its definition.
func checkFilter(t *testing.T, where string, n *Next, parties []Party) {
	t.Helper()
	before := mustJSON(t, n)
	f := n.FilterByParties(parties)
	if mustJSON(t, n) != before {
		t.Fatalf("%s: filtering changed its argument", where)
	}
	if len(parties) == 0 {
		if mustJSON(t, f) != before {
			t.Fatalf("%s: filtering by no party changed the result", where)
		}
		return
	}
	in := func(p Party) bool {
		for _, q := range parties {
			if mustJSON(t, p) == mustJSON(t, q) {
				return true
			}
		}
		return false
	}
	var deposits []CanDeposit
	for _, d := range n.ApplicableInputs.Deposits {
		if in(d.From) {
			deposits = append(deposits, d)
		}
	}
	var choices []CanChoose
	for _, c := range n.ApplicableInputs.Choices {
		if in(c.Choice.Owner) {
			choices = append(choices, c)
		}
	}
	want := Next{CanReduce: n.CanReduce, ApplicableInputs: ApplicableInputs{Notify: n.ApplicableInputs.Notify, Deposits: deposits, Choices: choices}}
	if mustJSON(t, f) != mustJSON(t, want) {
		t.Fatalf("%s: filtered by %d parties\ngot  %s\nwant %s", where, len(parties), mustJSON(t, f), mustJSON(t, want))
	}
}

// checkNextSchema checks the JSON of n against the OpenAPI schema "Next"
// of marlowe-runtime-web (.golden/OpenApi/golden): every object has its
// required keys and no other, integers are numbers, booleans booleans.
func checkNextSchema(t *testing.T, where string, n *Next) {
	t.Helper()
	js := mustJSON(t, n)
	dec := json.NewDecoder(bytes.NewReader([]byte(js)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v: %s", where, err, js)
	}
	fail := func(what string) { t.Fatalf("%s: JSON %s: %s", where, what, js) }
	keys := func(v any, required []string, optional ...string) map[string]any {
		m, ok := v.(map[string]any)
		if !ok {
			fail("not an object")
		}
		for _, k := range required {
			if _, ok := m[k]; !ok {
				fail("missing " + k)
			}
		}
		for k := range m {
			if !slices.Contains(required, k) && !slices.Contains(optional, k) {
				fail("extra key " + k)
			}
		}
		return m
	}
	integer := func(v any) {
		if _, ok := v.(json.Number); !ok {
			fail("not a number")
		}
	}
	boolean := func(v any) {
		if _, ok := v.(bool); !ok {
			fail("not a boolean")
		}
	}
	array := func(v any) []any {
		a, ok := v.([]any)
		if !ok {
			fail("not an array")
		}
		return a
	}
	party := func(v any) {
		m, ok := v.(map[string]any)
		if !ok || len(m) != 1 {
			fail("bad party")
		}
		if _, ok := m["role_token"]; !ok {
			keys(v, []string{"address"})
		}
	}
	top := keys(v, []string{"can_reduce", "applicable_inputs"})
	boolean(top["can_reduce"])
	ai := keys(top["applicable_inputs"], []string{"deposits", "choices"}, "notify")
	if nv, ok := ai["notify"]; ok {
		m := keys(nv, []string{"is_merkleized_continuation", "case_index"})
		integer(m["case_index"])
		boolean(m["is_merkleized_continuation"])
	}
	for _, d := range array(ai["deposits"]) {
		m := keys(d, []string{"party", "can_deposit", "of_token", "into_account", "case_index", "is_merkleized_continuation"})
		party(m["party"])
		party(m["into_account"])
		integer(m["can_deposit"])
		integer(m["case_index"])
		boolean(m["is_merkleized_continuation"])
		keys(m["of_token"], []string{"currency_symbol", "token_name"})
	}
	for _, c := range array(ai["choices"]) {
		m := keys(c, []string{"for_choice", "can_choose_between", "case_index", "is_merkleized_continuation"})
		party(keys(m["for_choice"], []string{"choice_name", "choice_owner"})["choice_owner"])
		for _, b := range array(m["can_choose_between"]) {
			bm := keys(b, []string{"from", "to"})
			integer(bm["from"])
			integer(bm["to"])
		}
		integer(m["case_index"])
		boolean(m["is_merkleized_continuation"])
	}
}

// TestNextIntervalErrors covers the errors of ComputeNext and the edges of
// the interval around timeouts and minTime.
func TestNextIntervalErrors(t *testing.T) {
	a := role("a")
	waiting := whenCases(100, &Close{}, plainCase(&Notify{Observation: &TrueObs{}}))
	for _, c := range []struct {
		name    string
		iv      TimeInterval
		st      State
		c       Contract
		err     string // the JSON of the *IntervalError, or "" for none
		reduce  bool
		notify  bool
		minTime int64
	}{
		{name: "start after end", iv: span(20, 10), st: stateAt(0), c: waiting, err: `{"invalidInterval":{"from":20,"to":10}}`},
		{name: "start after end and in the past", iv: span(20, 10), st: stateAt(50), c: waiting, err: `{"invalidInterval":{"from":20,"to":10}}`},
		{name: "end before minTime", iv: span(10, 49), st: stateAt(50), c: waiting, err: `{"intervalInPastError":{"from":10,"minTime":50,"to":49}}`},
		{name: "end at minTime", iv: span(10, 50), st: stateAt(50), c: waiting, notify: true},
		{name: "one instant", iv: span(60, 60), st: stateAt(50), c: waiting, notify: true},
		// The timeout inside the interval: InvalidInterval with the interval
		// as requested, not trimmed to minTime.
		{name: "timeout inside", iv: span(10, 150), st: stateAt(50), c: waiting, err: `{"invalidInterval":{"from":10,"to":150}}`},
		{name: "timeout at the end", iv: span(60, 100), st: stateAt(50), c: waiting, err: `{"invalidInterval":{"from":60,"to":100}}`},
		{name: "timeout just after the end", iv: span(60, 99), st: stateAt(50), c: waiting, notify: true},
		// The timeout at or before the start: the When times out; its
		// continuation is a Close, which has nothing to refund.
		{name: "timeout at the start", iv: span(100, 200), st: stateAt(50), c: waiting, reduce: true},
		{name: "timeout at minTime", iv: span(10, 200), st: stateAt(100), c: waiting, reduce: true},
		{name: "close", iv: span(0, 10), st: stateAt(0), c: &Close{}},
		{name: "close with accounts", iv: span(0, 10), st: stateAt(0, acct(a, ada, 5)), c: &Close{}, reduce: true},
		{name: "close with only an empty account", iv: span(0, 10), st: stateAt(0, acct(a, ada, 0)), c: &Close{}},
		{name: "close in the past", iv: span(0, 10), st: stateAt(20), c: &Close{}, err: `{"intervalInPastError":{"from":0,"minTime":20,"to":10}}`},
		// Reduction before the When.
		{name: "let before", iv: span(0, 10), st: stateAt(0), c: &Let{Name: ValueID{Name: []byte("x")}, Value: cst(1), Then: waiting}, reduce: true, notify: true},
	} {
		n, err := ComputeNext(Environment{TimeInterval: c.iv}, c.st, c.c)
		if c.err != "" {
			var ie *IntervalError
			if !errors.As(err, &ie) || n != nil {
				t.Fatalf("%s: want an interval error, got %v %v", c.name, n, err)
			}
			if got := mustJSON(t, ie); got != c.err {
				t.Fatalf("%s: error %s, want %s", c.name, got, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n.CanReduce != c.reduce || (n.ApplicableInputs.Notify != nil) != c.notify ||
			len(n.ApplicableInputs.Deposits) != 0 || len(n.ApplicableInputs.Choices) != 0 {
			t.Fatalf("%s: %s", c.name, mustJSON(t, n))
		}
	}
	// A closed contract, as JSON.
	n := mustNext(t, span(0, 10), stateAt(0), &Close{})
	if got := mustJSON(t, n); got != `{"applicable_inputs":{"choices":[],"deposits":[]},"can_reduce":false}` {
		t.Fatalf("closed contract: %s", got)
	}
	// Malformed values are errors, not panics.
	for name, c := range map[string]Contract{
		"nil contract":    nil,
		"nil action":      whenCases(100, &Close{}, Case{Then: &Close{}}),
		"nil amount":      whenCases(100, &Close{}, plainCase(&Deposit{IntoAccount: a, From: a, Token: ada})),
		"nil bound":       whenCases(100, &Close{}, plainCase(&Choice{Choice: choiceID("c", a), Bounds: []Bound{{From: bi(1)}}})),
		"nil observation": whenCases(100, &Close{}, plainCase(&Notify{})),
	} {
		if _, err := ComputeNext(Environment{TimeInterval: span(0, 10)}, stateAt(0), c); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ComputeNext(Environment{TimeInterval: TimeInterval{From: bi(0)}}, stateAt(0), &Close{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("nil interval end: %v", err)
	}
}

// TestNextCases checks the reference's rules one by one on hand-written
// When contracts.
func TestNextCases(t *testing.T) {
	a, b := role("a"), role("b")
	iv := span(10, 20)
	st := stateAt(0, acct(a, ada, 7))
	dep := func(into, from Party, tok Token, v Value) *Deposit {
		return &Deposit{IntoAccount: into, From: from, Token: tok, Amount: v}
	}
	cont := &Pay{From: a, To: toParty(b), Token: ada, Value: cst(1), Then: &Close{}}
	h := ContinuationHash(cont)

	t.Run("notify", func(t *testing.T) {
		// False notifies are skipped; the first true one wins.
		w := whenCases(100, &Close{},
			plainCase(&Notify{Observation: &FalseObs{}}),
			plainCase(dep(a, a, ada, cst(1))),
			merkleizedCase(&Notify{Observation: &ValueGT{Left: &AvailableMoney{Account: a, Token: ada}, Right: cst(5)}}, cont),
			plainCase(&Notify{Observation: &TrueObs{}}))
		n := mustNext(t, iv, st, w)
		if nt := n.ApplicableInputs.Notify; nt == nil || nt.CaseIndex != 2 || !nt.Merkleized || !bytes.Equal(nt.ContinuationHash, h[:]) {
			t.Fatalf("%s", mustJSON(t, n))
		}
		// With no true notify there is none.
		w = whenCases(100, &Close{}, plainCase(&Notify{Observation: &FalseObs{}}), plainCase(&Notify{Observation: &ChoseSomething{Choice: choiceID("c", a)}}))
		if n := mustNext(t, iv, st, w); n.ApplicableInputs.Notify != nil {
			t.Fatalf("%s", mustJSON(t, n))
		}
		// The notify survives any filter.
		w = whenCases(100, &Close{}, plainCase(&Notify{Observation: &TrueObs{}}))
		if f := mustNext(t, iv, st, w).FilterByParties([]Party{b}); f.ApplicableInputs.Notify == nil {
			t.Fatal("the notify was filtered out")
		}
	})

	t.Run("deposits", func(t *testing.T) {
		w := whenCases(100, &Close{},
			plainCase(dep(a, b, ada, cst(10))),
			plainCase(dep(a, b, ada, &AddValue{Left: cst(4), Right: cst(6)})),                    // evaluates to the same: shadowed
			merkleizedCase(dep(a, b, ada, cst(10)), cont),                                        // merkleized: kept
			merkleizedCase(dep(a, b, ada, cst(10)), &Close{}),                                    // merkleized with another hash: shadowed
			plainCase(dep(b, b, ada, cst(10))),                                                   // another account: kept
			plainCase(dep(a, b, ada, &NegValue{Value: &AvailableMoney{Account: a, Token: ada}})), // negative: kept
			plainCase(dep(a, b, ada, cst(0))),                                                    // zero: kept
			plainCase(dep(a, b, dollar, &TimeIntervalEnd{})))
		n := mustNext(t, iv, st, w)
		var got []string
		for _, d := range n.ApplicableInputs.Deposits {
			got = append(got, fmt.Sprintf("%d:%v:%v", d.CaseIndex, d.Amount, d.Merkleized))
		}
		want := []string{"0:10:false", "2:10:true", "4:10:false", "5:-7:false", "6:0:false", "7:20:false"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("deposits %v, want %v", got, want)
		}
		// Each is accepted, a non-positive one with a warning, but for the
		// merkleized one of case 2: the semantics take the plain case 0,
		// which has the same action (see TestNextReferenceQuirks).
		for _, d := range n.ApplicableInputs.Deposits {
			in := d.Input()
			if in.Merkleized() {
				in.Continuation = cont
			}
			out, err := ComputeTransaction(TransactionInput{Interval: iv, Inputs: []Input{in}}, st, w)
			if d.CaseIndex == 2 {
				var te *TransactionError
				if !errors.As(err, &te) || te.Kind != TEHashMismatch {
					t.Fatalf("case 2: %v", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("case %d: %v", d.CaseIndex, err)
			}
			if (d.Amount.Sign() <= 0) != (len(out.Warnings) == 1) {
				t.Fatalf("case %d: warnings %v", d.CaseIndex, out.Warnings)
			}
		}
		// Filtering keeps the deposits made by the party, not those into
		// its account.
		if f := n.FilterByParties([]Party{a}); len(f.ApplicableInputs.Deposits) != 0 {
			t.Fatalf("filtered by the account's owner: %s", mustJSON(t, f))
		}
		if f := n.FilterByParties([]Party{a, b}); len(f.ApplicableInputs.Deposits) != 6 {
			t.Fatalf("filtered by the depositor: %s", mustJSON(t, f))
		}
	})

	t.Run("choices", func(t *testing.T) {
		c1, c2, c3 := choiceID("c", a), choiceID("c", b), choiceID("d", a)
		w := whenCases(100, &Close{},
			plainCase(&Choice{Choice: c1, Bounds: bounds(2, 5, 1, 3, 8, 8, 9, 10)}), // sorted and merged; [8,8] and [9,10] only adjoin
			plainCase(&Choice{Choice: c1, Bounds: bounds(0, 12)}),                   // what is left of it
			plainCase(&Choice{Choice: c1, Bounds: bounds(3, 4)}),                    // covered: not applicable
			plainCase(&Choice{Choice: c2, Bounds: bounds(3, 4)}),                    // another owner
			plainCase(&Choice{Choice: c3}),                                          // no bounds: not applicable
			merkleizedCase(&Choice{Choice: c1, Bounds: bounds(-2, -1, 13, 13)}, cont),
			plainCase(&Choice{Choice: c3, Bounds: bounds(1, 1)}))
		n := mustNext(t, iv, st, w)
		var got []string
		for _, c := range n.ApplicableInputs.Choices {
			got = append(got, fmt.Sprintf("%d:%s/%s:%s", c.CaseIndex, c.Choice.Name, c.Choice.Owner.Role, boundsText(c.Bounds)))
		}
		want := []string{"0:c/a:[1,5][8,8][9,10]", "1:c/a:[0,0][6,7][11,12]", "3:c/b:[3,4]", "5:c/a:[-2,-1][13,13]", "6:d/a:[1,1]"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("choices %v\nwant    %v", got, want)
		}
		if f := n.FilterByParties([]Party{b}); len(f.ApplicableInputs.Choices) != 1 || f.ApplicableInputs.Choices[0].CaseIndex != 3 {
			t.Fatalf("filtered by b: %s", mustJSON(t, f))
		}
	})

	t.Run("reduction first", func(t *testing.T) {
		// The When is reached after a Let, a timed-out When and a Pay; the
		// deposit's amount is evaluated in the state they leave.
		x := ValueID{Name: []byte("x")}
		inner := whenCases(100, &Close{}, plainCase(dep(a, b, ada, &AddValue{Left: &UseValue{Name: x}, Right: &AvailableMoney{Account: a, Token: ada}})))
		timedOut := &When{Cases: []Case{plainCase(&Notify{Observation: &TrueObs{}})}, Timeout: bi(10),
			TimeoutContinuation: &Pay{From: a, To: toParty(b), Token: ada, Value: cst(2), Then: inner}}
		c := &Let{Name: x, Value: cst(3), Then: timedOut}
		n := mustNext(t, iv, st, c)
		if !n.CanReduce || n.ApplicableInputs.Notify != nil || len(n.ApplicableInputs.Deposits) != 1 || n.ApplicableInputs.Deposits[0].Amount.Int64() != 3+5 {
			t.Fatalf("%s", mustJSON(t, n))
		}
		// The caller's state is untouched.
		if len(st.Accounts) != 1 || st.Accounts[0].Amount.Int64() != 7 || len(st.BoundValues) != 0 || st.MinTime.Int64() != 0 {
			t.Fatalf("the state changed: %s", mustJSON(t, &st))
		}
	})
}

// TestNextReferenceQuirks pins down where the reference parts from what the
// semantics accept, so that a change is deliberate.
func TestNextReferenceQuirks(t *testing.T) {
	a := role("a")
	// Values are evaluated with the interval as requested, not trimmed: the
	// deposit of TimeIntervalStart is 50 here, where the semantics, which
	// raise the start to minTime, expect 100.
	w := whenCases(1000, &Close{}, plainCase(&Deposit{IntoAccount: a, From: a, Token: ada, Amount: &TimeIntervalStart{}}))
	st := stateAt(100)
	n := mustNext(t, span(50, 200), st, w)
	if d := n.ApplicableInputs.Deposits; len(d) != 1 || d[0].Amount.Int64() != 50 {
		t.Fatalf("%s", mustJSON(t, n))
	}
	wantError(t, TransactionInput{Interval: span(50, 200), Inputs: []Input{depositInput(a, a, ada, 50)}}, st, w, TEApplyNoMatchError)
	wantOutput(t, TransactionInput{Interval: span(50, 200), Inputs: []Input{depositInput(a, a, ada, 100)}}, st, w,
		`{"contract":"close","payments":[{"amount":100,"payment_from":{"role_token":"a"},"to":{"party":{"role_token":"a"}},"token":`+adaJSON+`}],"state":{"accounts":[],"boundValues":[],"choices":[],"minTime":100},"warnings":[]}`)
	// Trimmed by hand, the interval gives what the semantics expect.
	if d := mustNext(t, span(100, 200), st, w).ApplicableInputs.Deposits; d[0].Amount.Int64() != 100 {
		t.Fatalf("trimmed: %v", d[0].Amount)
	}

	// A reversed bound is read as [To, From], though it accepts nothing, and
	// it shadows the same numbers in later cases.
	ch := choiceID("c", a)
	w = whenCases(1000, &Close{},
		plainCase(&Choice{Choice: ch, Bounds: bounds(5, 3)}),
		plainCase(&Choice{Choice: ch, Bounds: bounds(1, 10)}))
	n = mustNext(t, span(0, 10), stateAt(0), w)
	var got []string
	for _, c := range n.ApplicableInputs.Choices {
		got = append(got, fmt.Sprintf("%d:%s", c.CaseIndex, boundsText(c.Bounds)))
	}
	if want := []string{"0:[3,5]", "1:[1,2][6,10]"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("reversed bound: %v, want %v", got, want)
	}
	wantError(t, tx(0, 10, choiceInput("c", a, 4)), stateAt(0), whenCases(1000, &Close{}, w.Cases[0]), TEApplyNoMatchError)
	if i := firstMatchingCase(Environment{TimeInterval: span(0, 10)}, stateAt(0), w, &IChoice{Choice: ch, ChosenNum: bi(4)}); i != 1 {
		t.Fatalf("the semantics take case %d for 4", i)
	}

	// A deposit that repeats an earlier one with the other merkleization is
	// listed, but the semantics take the earlier case for its input, so the
	// merkleized input is refused.
	dep := &Deposit{IntoAccount: a, From: a, Token: ada, Amount: cst(3)}
	w = whenCases(1000, &Close{}, plainCase(dep), merkleizedCase(dep, &Close{}))
	n = mustNext(t, span(0, 10), stateAt(0), w)
	if d := n.ApplicableInputs.Deposits; len(d) != 2 || d[0].Merkleized || !d[1].Merkleized || d[1].CaseIndex != 1 {
		t.Fatalf("%s", mustJSON(t, n))
	}
	in := n.ApplicableInputs.Deposits[1].Input()
	in.Continuation = &Close{}
	wantError(t, tx(0, 10, in), stateAt(0), w, TEHashMismatch)
	wantOutput(t, tx(0, 10, n.ApplicableInputs.Deposits[0].Input()), stateAt(0), w,
		`{"contract":"close","payments":[{"amount":3,"payment_from":{"role_token":"a"},"to":{"party":{"role_token":"a"}},"token":`+adaJSON+`}],"state":{"accounts":[],"boundValues":[],"choices":[],"minTime":0},"warnings":[]}`)
}

// TestBoundsDifference checks the choice bounds' difference on vectors and
// against its definition on random bounds: the union of xs less the union
// of ys as real intervals, one bound per connected piece that holds an
// integer.
func TestBoundsDifference(t *testing.T) {
	for _, c := range []struct {
		xs, ys []Bound
		want   string
	}{
		{nil, nil, ""},
		{bounds(1, 3, 2, 5), nil, "[1,5]"},
		{bounds(3, 4, 1, 2), nil, "[1,2][3,4]"},
		{bounds(1, 3, 3, 4), nil, "[1,4]"},
		{bounds(5, 1), nil, "[1,5]"},
		{bounds(7, 7, 7, 7), nil, "[7,7]"},
		{bounds(1, 10), bounds(3, 5), "[1,2][6,10]"},
		{bounds(1, 10), bounds(3, 3, 4, 4), "[1,2][5,10]"},
		{bounds(1, 10), bounds(3, 3, 5, 5), "[1,2][4,4][6,10]"},
		{bounds(1, 10), bounds(1, 10), ""},
		{bounds(1, 10), bounds(0, 1, 10, 11), "[2,9]"},
		{bounds(1, 5), bounds(5, 9), "[1,4]"},
		{bounds(5, 9), bounds(1, 5), "[6,9]"},
		{bounds(5, 5), bounds(1, 5), ""},
		{bounds(1, 2, 10, 12), bounds(3, 5), "[1,2][10,12]"},
		{bounds(1, 10), bounds(3, 4, 7, 8), "[1,2][5,6][9,10]"},
		{bounds(-10, 10), bounds(-3, -2), "[-10,-4][-1,10]"},
	} {
		if got := boundsText(boundsDifference(c.xs, c.ys)); got != c.want {
			t.Errorf("%s - %s = %s, want %s", boundsText(c.xs), boundsText(c.ys), got, c.want)
		}
	}
	// Big integers.
	huge, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	hugeBound := []Bound{{From: new(big.Int).Neg(huge), To: huge}}
	if got := boundsText(boundsDifference(hugeBound, bounds(0, 0))); got != "[-123456789012345678901234567890,-1][1,123456789012345678901234567890]" {
		t.Errorf("big: %s", got)
	}

	// Against the definition, in half units: the point p/2 is in a set of
	// bounds when it lies in one of them (reversed ones read backwards).
	in := func(p int64, bs []Bound) bool {
		for _, b := range bs {
			lo, hi := b.From.Int64(), b.To.Int64()
			if lo > hi {
				lo, hi = hi, lo
			}
			if 2*lo <= p && p <= 2*hi {
				return true
			}
		}
		return false
	}
	g := newSemGen(t, 9)
	randomBounds := func() []Bound {
		var out []Bound
		for n := g.r.IntN(4); n > 0; n-- {
			lo := g.r.Int64N(14) - 4
			out = append(out, Bound{From: bi(lo), To: bi(lo + g.r.Int64N(5) - 1)})
		}
		return out
	}
	for iter := 0; iter < 5000; iter++ {
		xs, ys := randomBounds(), randomBounds()
		set := func(p int64) bool { return in(p, xs) && !in(p, ys) }
		args := boundsText(xs) + boundsText(ys)
		got := boundsDifference(xs, ys)
		if boundsText(xs)+boundsText(ys) != args {
			t.Fatalf("the arguments changed: %s", args)
		}
		where := fmt.Sprintf("%s - %s = %s", boundsText(xs), boundsText(ys), boundsText(got))
		for k, b := range got {
			f, to := b.From.Int64(), b.To.Int64()
			if f > to || (k > 0 && got[k-1].To.Int64() >= f) {
				t.Fatalf("%s: not sorted and disjoint", where)
			}
			// Connected: every point between its ends is in the set.
			for p := 2 * f; p <= 2*to; p++ {
				if !set(p) {
					t.Fatalf("%s: %d/2 is not in the set", where, p)
				}
			}
			// Maximal: the integers next to it are not in its piece.
			if set(2*f-1) && set(2*f-2) || set(2*to+1) && set(2*to+2) {
				t.Fatalf("%s: [%d,%d] is not a whole piece", where, f, to)
			}
		}
		// Every integer of the set is in a bound.
		for p := int64(-20); p <= 40; p += 2 {
			if set(p) != inBounds(bi(p/2), got) {
				t.Fatalf("%s: %d", where, p/2)
			}
		}
	}
}

// TestNextJSON compares whole results with hand-written JSON in the form
// of the reference's ToJSON instances.
func TestNextJSON(t *testing.T) {
	a, b := role("a"), role("b")
	addr, err := ParsePartyAddress("addr_test1vq9prvx8ufwutkwxx9cmmuuajaqmjqwujqlp9d8pvg6gupczgtm9j")
	if err != nil {
		t.Fatal(err)
	}
	ap := Party{Address: addr}
	huge, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	cont := &Close{}
	w := whenCases(1000, &Close{},
		plainCase(&Notify{Observation: &FalseObs{}}),
		plainCase(&Deposit{IntoAccount: a, From: a, Token: ada, Amount: cst(10)}),
		plainCase(&Deposit{IntoAccount: a, From: a, Token: ada, Amount: cst(10)}),
		plainCase(&Choice{Choice: choiceID("c", a), Bounds: bounds(1, 3, 2, 5)}),
		merkleizedCase(&Choice{Choice: choiceID("c", a), Bounds: bounds(4, 8)}, cont),
		plainCase(&Notify{Observation: &TrueObs{}}),
		plainCase(&Notify{Observation: &TrueObs{}}),
		merkleizedCase(&Deposit{IntoAccount: ap, From: b, Token: dollar, Amount: cst(-5)}, cont),
		plainCase(&Deposit{IntoAccount: b, From: ap, Token: dollar, Amount: &Constant{N: huge}}),
		plainCase(&Choice{Choice: choiceID("ch\u00e9", ap), Bounds: []Bound{{From: new(big.Int).Neg(huge), To: huge}}}))
	n := mustNext(t, span(10, 20), stateAt(0), w)
	want := `{"applicable_inputs":{"choices":[` +
		`{"can_choose_between":[{"from":1,"to":5}],"case_index":3,"for_choice":{"choice_name":"c","choice_owner":{"role_token":"a"}},"is_merkleized_continuation":false},` +
		`{"can_choose_between":[{"from":6,"to":8}],"case_index":4,"for_choice":{"choice_name":"c","choice_owner":{"role_token":"a"}},"is_merkleized_continuation":true},` +
		`{"can_choose_between":[{"from":-123456789012345678901234567890,"to":123456789012345678901234567890}],"case_index":9,"for_choice":{"choice_name":"ché","choice_owner":{"address":"addr_test1vq9prvx8ufwutkwxx9cmmuuajaqmjqwujqlp9d8pvg6gupczgtm9j"}},"is_merkleized_continuation":false}],` +
		`"deposits":[` +
		`{"can_deposit":10,"case_index":1,"into_account":{"role_token":"a"},"is_merkleized_continuation":false,"of_token":{"currency_symbol":"","token_name":""},"party":{"role_token":"a"}},` +
		`{"can_deposit":-5,"case_index":7,"into_account":{"address":"addr_test1vq9prvx8ufwutkwxx9cmmuuajaqmjqwujqlp9d8pvg6gupczgtm9j"},"is_merkleized_continuation":true,"of_token":{"currency_symbol":"85bb","token_name":"dollar"},"party":{"role_token":"b"}},` +
		`{"can_deposit":123456789012345678901234567890,"case_index":8,"into_account":{"role_token":"b"},"is_merkleized_continuation":false,"of_token":{"currency_symbol":"85bb","token_name":"dollar"},"party":{"address":"addr_test1vq9prvx8ufwutkwxx9cmmuuajaqmjqwujqlp9d8pvg6gupczgtm9j"}}],` +
		`"notify":{"case_index":5,"is_merkleized_continuation":false}},"can_reduce":false}`
	got := mustJSON(t, n)
	if !sameJSON(t, []byte(got), want) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Byte for byte too: keys in aeson's order, no spaces.
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(want)); err != nil || got != compact.String() {
		t.Fatalf("not byte-identical:\ngot  %s\nwant %s", got, compact.String())
	}
	checkNextSchema(t, "JSON", n)
	// encoding/json finds the methods on values and pointers alike.
	if js, err := json.Marshal(struct{ N Next }{*n}); err != nil || !bytes.Contains(js, []byte(`"notify":{"case_index":5`)) {
		t.Fatalf("json.Marshal: %s %v", js, err)
	}
	// The parts.
	if got := mustJSON(t, n.ApplicableInputs.Notify); got != `{"case_index":5,"is_merkleized_continuation":false}` {
		t.Fatalf("notify %s", got)
	}
	if got := mustJSON(t, n.ApplicableInputs.Deposits[0]); got != `{"can_deposit":10,"case_index":1,"into_account":{"role_token":"a"},"is_merkleized_continuation":false,"of_token":{"currency_symbol":"","token_name":""},"party":{"role_token":"a"}}` {
		t.Fatalf("deposit %s", got)
	}

	// The reference's own JSON test (propJSON in Spec/Marlowe/Semantics/Next.hs):
	// one deposit case of a constant, no notify key.
	one := whenCases(1000, &Close{}, plainCase(&Deposit{IntoAccount: b, From: a, Token: dollar, Amount: cst(42)}))
	if got := mustJSON(t, mustNext(t, span(0, 0), stateAt(0), one).ApplicableInputs); !sameJSON(t, []byte(got),
		`{"deposits":[{"party":{"role_token":"a"},"can_deposit":42,"of_token":{"currency_symbol":"85bb","token_name":"dollar"},"into_account":{"role_token":"b"},"case_index":0,"is_merkleized_continuation":false}],"choices":[]}`) {
		t.Fatalf("propJSON: %s", got)
	}
	// A contract that can reduce and then waits.
	red := &Assert{Observation: &FalseObs{}, Then: whenCases(1000, &Close{}, plainCase(&Notify{Observation: &TrueObs{}}))}
	if got := mustJSON(t, mustNext(t, span(0, 0), stateAt(0), red)); got != `{"applicable_inputs":{"choices":[],"deposits":[],"notify":{"case_index":0,"is_merkleized_continuation":false}},"can_reduce":true}` {
		t.Fatalf("reducible: %s", got)
	}
	// A name that is not valid UTF-8 uses the package's escape; an address
	// that cannot be shown is an error.
	bad := Next{ApplicableInputs: ApplicableInputs{Deposits: []CanDeposit{{IntoAccount: Party{Role: []byte{0xff}}, From: Party{Address: &PartyAddress{}}, Token: ada, Amount: bi(1)}}}}
	if _, err := bad.MarshalJSON(); err == nil {
		t.Fatal("an address with a short hash was written")
	}
	bad.ApplicableInputs.Deposits[0].From = a
	if got := mustJSON(t, bad); !bytes.Contains([]byte(got), []byte(`"into_account":{"role_token":"\u00000xff"}`)) {
		t.Fatalf("escaped name: %s", got)
	}
}

// TestEnvironmentFromTimes checks the conversion of the runtime's
// validityStart and validityEnd to POSIX milliseconds, truncated towards
// zero as mkEnvironment does.
func TestEnvironmentFromTimes(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{time.UnixMilli(1700000000123), 1700000000123},
		{time.UnixMilli(1700000000123).Add(999999 * time.Nanosecond), 1700000000123},
		{time.Date(2024, 1, 2, 3, 4, 5, 6_700_000, time.FixedZone("x", 3600)), 1704161045006},
		{time.Unix(0, 0), 0},
		{time.Unix(0, -1), 0},
		{time.Unix(-1, 500_000_000), -500},
		{time.Unix(-2, 999_000_001), -1000},
		{time.Unix(-2, 0), -2000},
	} {
		env := EnvironmentFromTimes(c.t, c.t.Add(time.Second))
		if env.TimeInterval.From.Int64() != c.want {
			t.Errorf("%v: %v, want %d", c.t, env.TimeInterval.From, c.want)
		}
	}
	env := EnvironmentFromTimes(time.UnixMilli(5), time.UnixMilli(9))
	if env.TimeInterval.From.Int64() != 5 || env.TimeInterval.To.Int64() != 9 {
		t.Fatalf("%v", env)
	}
}

// contractText is the core JSON of a contract, for failure messages.
func contractText(c Contract) string {
	js, err := ContractJSON(c)
	if err != nil {
		return err.Error()
	}
	return string(js)
}
