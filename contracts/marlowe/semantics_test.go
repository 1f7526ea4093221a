package marlowe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// Builders for the hand-written cases.

func role(s string) Party { return Party{Role: []byte(s)} }

var (
	ada    = Token{Currency: []byte{}, Name: []byte{}}
	dollar = Token{Currency: []byte{0x85, 0xbb}, Name: []byte("dollar")}
)

func bi(v int64) *big.Int { return big.NewInt(v) }

func cst(v int64) Value { return &Constant{N: bi(v)} }

func span(from, to int64) TimeInterval { return TimeInterval{From: bi(from), To: bi(to)} }

func acct(p Party, tok Token, amount int64) AccountEntry {
	return AccountEntry{Party: p, Token: tok, Amount: bi(amount)}
}

func stateAt(minTime int64, accounts ...AccountEntry) State {
	return State{Accounts: accounts, MinTime: bi(minTime)}
}

func toParty(p Party) Payee   { return Payee{Kind: PayeeParty, Party: p} }
func toAccount(p Party) Payee { return Payee{Kind: PayeeAccount, Party: p} }

func whenCases(timeout int64, cont Contract, cases ...Case) *When {
	return &When{Cases: cases, Timeout: bi(timeout), TimeoutContinuation: cont}
}

func depositInput(into, from Party, tok Token, amount int64) Input {
	return Input{Content: &IDeposit{IntoAccount: into, From: from, Token: tok, Amount: bi(amount)}}
}

func choiceInput(name string, owner Party, n int64) Input {
	return Input{Content: &IChoice{Choice: ChoiceID{Name: []byte(name), Owner: owner}, ChosenNum: bi(n)}}
}

func tx(from, to int64, inputs ...Input) TransactionInput {
	return TransactionInput{Interval: span(from, to), Inputs: inputs}
}

// mustJSON returns the JSON of v, failing the test on an error.
func mustJSON(t *testing.T, v json.Marshaler) string {
	t.Helper()
	b, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameJSON compares two JSON documents as values.
func sameJSON(t *testing.T, got []byte, want string) bool {
	t.Helper()
	return reflect.DeepEqual(normalizeJSON(t, got), normalizeJSON(t, []byte(want)))
}

// wantOutput computes tx and compares the whole output with the JSON want.
func wantOutput(t *testing.T, tr TransactionInput, st State, c Contract, want string) *TransactionOutput {
	t.Helper()
	out, err := ComputeTransaction(tr, st, c)
	if err != nil {
		t.Fatalf("unexpected error %v", err)
	}
	got := mustJSON(t, out)
	if !sameJSON(t, []byte(got), want) {
		t.Fatalf("output\ngot  %s\nwant %s", got, want)
	}
	return out
}

// wantError computes tx and checks the kind of its error.
func wantError(t *testing.T, tr TransactionInput, st State, c Contract, kind TransactionErrorKind) *TransactionError {
	t.Helper()
	out, err := ComputeTransaction(tr, st, c)
	var te *TransactionError
	if out != nil || !errors.As(err, &te) {
		t.Fatalf("want %v, got %v, %v", kind, out, err)
	}
	if te.Kind != kind {
		t.Fatalf("want %v, got %v", kind, te)
	}
	return te
}

const adaJSON = `{"currency_symbol":"","token_name":""}`

// checkDataRoundTrip checks that a contract and a state survive Plutus Data
// (CBOR and back) unchanged.
func checkDataRoundTrip(t *testing.T, where string, c Contract, st *State) {
	t.Helper()
	back, cd := contractCodec.throughData(t, where, c)
	if !bytes.Equal(pd.Encode(ContractToData(back)), cd) {
		t.Fatalf("%s: contract changed through Plutus Data", where)
	}
	sback, sd := stateCodec.throughData(t, where, st)
	if !bytes.Equal(pd.Encode(sback.ToData()), sd) {
		t.Fatalf("%s: state changed through Plutus Data", where)
	}
	j1, err1 := st.MarshalJSON()
	j2, err2 := sback.MarshalJSON()
	if err1 != nil || err2 != nil || !bytes.Equal(j1, j2) {
		t.Fatalf("%s: state JSON changed through Plutus Data: %v %v", where, err1, err2)
	}
}

type semanticsPath struct {
	Contract     json.RawMessage `json:"contract"`
	State        json.RawMessage `json:"state"`
	Transactions []struct {
		Input  json.RawMessage `json:"input"`
		Output json.RawMessage `json:"output"`
	} `json:"transactions"`
}

// referenceTraces are the marlowe-cardano reference traces' files (.paths).
func referenceTraces(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "marlowe-reference", "*.paths"))
	if len(files) != 24 {
		t.Fatalf("expected the 24 reference traces, found %d", len(files))
	}
	return files
}

// readJSONFile reads the JSON file f as a T.
func readJSONFile[T any](t *testing.T, f string) T {
	t.Helper()
	var v T
	raw, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	return v
}

// TestSemanticsReferenceTraces runs every transaction of every path of the
// marlowe-cardano reference traces, each on the state and contract the
// previous one computed, and compares warnings, payments, state and contract
// with the trace.
func TestSemanticsReferenceTraces(t *testing.T) {
	total, passed, withWarnings, withPayments := 0, 0, 0, 0
	for _, f := range referenceTraces(t) {
		for i, p := range readJSONFile[[]semanticsPath](t, f) {
			where := fmt.Sprintf("%s path %d", filepath.Base(f), i)
			c, err := ParseContractJSON(p.Contract)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			stp, err := ParseStateJSON(p.State)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			st := *stp
			for j, tr := range p.Transactions {
				total++
				at := fmt.Sprintf("%s tx %d", where, j)
				in, err := ParseTransactionInputJSON(tr.Input)
				if err != nil {
					t.Fatalf("%s: input: %v", at, err)
				}
				out, err := ComputeTransaction(*in, st, c)
				got, jerr := TransactionResultJSON(out, err)
				if jerr != nil {
					t.Errorf("%s: %v", at, jerr)
					break
				}
				if !reflect.DeepEqual(normalizeJSON(t, got), normalizeJSON(t, tr.Output)) {
					t.Errorf("%s: output differs\ngot  %s\nwant %s", at, got, tr.Output)
					break
				}
				// The trace's own output reads back to the same JSON.
				want, txErr, perr := ParseTransactionOutputJSON(tr.Output)
				if perr != nil || txErr != nil {
					t.Fatalf("%s: reading the trace's output: %v %v", at, perr, txErr)
				}
				if back := mustJSON(t, want); !sameJSON(t, []byte(back), string(tr.Output)) {
					t.Fatalf("%s: output JSON round trip\ngot  %s\nwant %s", at, back, tr.Output)
				}
				checkDataRoundTrip(t, at, out.Contract, &out.State)
				passed++
				if len(out.Warnings) > 0 {
					withWarnings++
				}
				if len(out.Payments) > 0 {
					withPayments++
				}
				st, c = out.State, out.Contract
			}
		}
	}
	t.Logf("%d of %d reference transactions match (%d with warnings, %d with payments)", passed, total, withWarnings, withPayments)
	if passed != total || total < 400 || withWarnings == 0 || withPayments == 0 {
		t.Fatalf("%d of %d reference transactions match", passed, total)
	}
}

// TestSemanticsBenchmarkTransactions recomputes the 100 validator runs of
// marlowe-plutus's benchmarks, resolving merkleized inputs from the
// transaction's datums if there are any: the datum the computed output
// implies must be among the transaction's datums, unless the contract closed.
func TestSemanticsBenchmarkTransactions(t *testing.T) {
	closed, continued, merkleized := 0, 0, 0
	for _, b := range loadBenchmarks(t, "semantics") {
		md := must(t, MarloweDataFromData, b.datum)
		red := must(t, RedeemerFromData, b.redeemer)
		for i := range red {
			if !red[i].Merkleized() {
				continue
			}
			merkleized++
			for _, p := range b.txData {
				if bytes.Equal(p.Key.(*pd.Bytes).B, red[i].ContinuationHash) {
					red[i].Continuation = must(t, ContractFromData, p.Value)
				}
			}
		}
		interval := benchmarkInterval(t, b)
		out, err := ComputeTransaction(TransactionInput{Interval: interval, Inputs: red}, md.State, md.Contract)
		if err != nil {
			t.Fatalf("%s: %v", b.name, err)
		}
		if _, ok := out.Contract.(*Close); ok {
			closed++
			continue
		}
		next := MarloweData{Params: md.Params, State: out.State, Contract: out.Contract}
		h := DataHash(next.ToData())
		found := false
		for _, p := range b.txData {
			found = found || bytes.Equal(p.Key.(*pd.Bytes).B, h[:])
		}
		if !found {
			t.Fatalf("%s: the computed output datum is not among the transaction's datums", b.name)
		}
		continued++
	}
	t.Logf("%d continuing and %d closing runs, %d merkleized inputs", continued, closed, merkleized)
	if continued == 0 || closed == 0 {
		t.Fatal("the benchmarks did not exercise both continuing and closing runs")
	}
}

// benchmarkInterval reads txInfoValidRange (field 7 of a Plutus V2 TxInfo) and
// closes it as the validator does.
func benchmarkInterval(t *testing.T, b benchmarkFile) TimeInterval {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "marlowe-plutus-benchmarks", "semantics", b.name))
	if err != nil {
		t.Fatal(err)
	}
	d, err := pd.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	txInfo := d.(*pd.Constr).Fields[2].(*pd.Constr).Fields[0].(*pd.Constr)
	rng := txInfo.Fields[7].(*pd.Constr)
	// Interval = Constr 0 [LowerBound, UpperBound]; a bound is
	// Constr 0 [Extended, closed]; Finite is Extended constructor 1.
	low := rng.Fields[0].(*pd.Constr)
	high := rng.Fields[1].(*pd.Constr)
	for _, bd := range []*pd.Constr{low, high} {
		if bd.Fields[0].(*pd.Constr).Index != 1 {
			t.Fatalf("%s: infinite validity bound", b.name)
		}
	}
	from := new(big.Int).Set(low.Fields[0].(*pd.Constr).Fields[0].(*pd.Integer).Big())
	if low.Fields[1].(*pd.Constr).Index == 0 {
		from.Add(from, big.NewInt(1))
	}
	to := new(big.Int).Set(high.Fields[0].(*pd.Constr).Fields[0].(*pd.Integer).Big())
	if high.Fields[1].(*pd.Constr).Index == 0 {
		to.Sub(to, big.NewInt(1))
	}
	return TimeInterval{From: from, To: to}
}

func TestIntervalErrors(t *testing.T) {
	st := stateAt(100)
	c := whenCases(1000, &Close{})
	te := wantError(t, tx(50, 40), st, c, TEIntervalError)
	if te.IntervalError.Kind != InvalidInterval {
		t.Fatalf("got %v", te)
	}
	if got := mustJSON(t, te); got != `{"context":{"invalidInterval":{"from":50,"to":40}},"error":"TEIntervalError"}` {
		t.Fatalf("JSON %s", got)
	}
	te = wantError(t, tx(10, 99), st, c, TEIntervalError)
	if te.IntervalError.Kind != IntervalInPastError || te.IntervalError.MinTime.Int64() != 100 {
		t.Fatalf("got %v", te)
	}
	if got := mustJSON(t, te); got != `{"context":{"intervalInPastError":{"from":10,"minTime":100,"to":99}},"error":"TEIntervalError"}` {
		t.Fatalf("JSON %s", got)
	}
	// An interval ending exactly at minTime is fine, and its start is raised.
	env, fixed, err := FixInterval(span(10, 100), st)
	if err != nil || env.TimeInterval.From.Int64() != 100 || env.TimeInterval.To.Int64() != 100 || fixed.MinTime.Int64() != 100 {
		t.Fatalf("FixInterval: %v %v %v", env, fixed, err)
	}
	// A later start moves minTime forward.
	if _, fixed, _ = FixInterval(span(150, 200), st); fixed.MinTime.Int64() != 150 || st.MinTime.Int64() != 100 {
		t.Fatalf("minTime %v (caller's %v)", fixed.MinTime, st.MinTime)
	}
	// TimeIntervalStart sees the fixed start.
	out := wantOutput(t, tx(10, 500), st, &Let{Name: ValueID{Name: []byte("t")}, Value: &TimeIntervalStart{}, Then: &Let{Name: ValueID{Name: []byte("e")}, Value: &TimeIntervalEnd{}, Then: c}},
		`{"contract":{"timeout":1000,"timeout_continuation":"close","when":[]},"payments":[],"state":{"accounts":[],"boundValues":[["t",100],["e",500]],"choices":[],"minTime":100},"warnings":[]}`)
	_ = out
}

func TestAmbiguousAndTimeout(t *testing.T) {
	st := stateAt(0, acct(role("a"), ada, 10))
	c := whenCases(100, &Close{})
	wantError(t, tx(50, 150), st, c, TEAmbiguousTimeIntervalError)
	wantError(t, tx(50, 100), st, c, TEAmbiguousTimeIntervalError) // the timeout is inclusive at the end
	// Entirely before the timeout: nothing happens.
	wantError(t, tx(0, 99), st, c, TEUselessTransaction)
	// At or after the timeout: the timeout continuation runs, and Close refunds.
	wantOutput(t, tx(100, 200), st, c,
		`{"contract":"close","payments":[{"amount":10,"payment_from":{"role_token":"a"},"to":{"party":{"role_token":"a"}},"token":`+adaJSON+`}],"state":{"accounts":[],"boundValues":[],"choices":[],"minTime":100},"warnings":[]}`)

	// Reduce tells what a timeout would pay out without rejecting a no-op.
	r, err := Reduce(span(100, 200), st, c)
	if err != nil || !r.Reduced || len(r.Payments) != 1 || r.Payments[0].Amount.Int64() != 10 {
		t.Fatalf("Reduce: %+v %v", r, err)
	}
	r, err = Reduce(span(0, 99), st, c)
	if err != nil || r.Reduced || r.Contract != c || len(r.State.Accounts) != 1 {
		t.Fatalf("Reduce before the timeout: %+v %v", r, err)
	}
	if _, err = Reduce(span(50, 150), st, c); err == nil || err.(*TransactionError).Kind != TEAmbiguousTimeIntervalError {
		t.Fatalf("Reduce ambiguous: %v", err)
	}
	if _, err = Reduce(span(5, 1), st, c); err == nil || err.(*TransactionError).Kind != TEIntervalError {
		t.Fatalf("Reduce invalid: %v", err)
	}
}

func TestUselessTransaction(t *testing.T) {
	// Close without accounts.
	wantError(t, tx(0, 10), stateAt(0), &Close{}, TEUselessTransaction)
	// Close with accounts that are all non-positive: nothing to refund, but
	// closing a contract with accounts is not useless.
	st := stateAt(0, acct(role("a"), ada, 0), acct(role("b"), ada, -3))
	wantOutput(t, tx(0, 10), st, &Close{},
		`{"contract":"close","payments":[],"state":{"accounts":[[[{"role_token":"a"},`+adaJSON+`],0],[[{"role_token":"b"},`+adaJSON+`],-3]],"boundValues":[],"choices":[],"minTime":0},"warnings":[]}`)
	// Close drops the non-positive accounts before the one it refunds, and
	// keeps those after the last positive one, as refundOne does.
	st = stateAt(0, acct(role("a"), ada, 0), acct(role("b"), ada, 5), acct(role("c"), ada, -1))
	wantOutput(t, tx(0, 10), st, &Close{},
		`{"contract":"close","payments":[{"amount":5,"payment_from":{"role_token":"b"},"to":{"party":{"role_token":"b"}},"token":`+adaJSON+`}],"state":{"accounts":[[[{"role_token":"c"},`+adaJSON+`],-1]],"boundValues":[],"choices":[],"minTime":0},"warnings":[]}`)
}

func TestApplyNoMatch(t *testing.T) {
	a := role("a")
	c := whenCases(100, &Close{}, Case{Action: &Deposit{IntoAccount: a, From: a, Token: ada, Amount: cst(10)}, Then: &Close{}})
	te := wantError(t, tx(0, 10, depositInput(a, a, ada, 11)), stateAt(0), c, TEApplyNoMatchError)
	if te.Input != 0 || mustJSON(t, te) != `"TEApplyNoMatchError"` {
		t.Fatalf("got %v", te)
	}
	// The first input applies and closes the contract; the second finds no When.
	te = wantError(t, tx(0, 10, depositInput(a, a, ada, 10), depositInput(a, a, ada, 10)), stateAt(0), c, TEApplyNoMatchError)
	if te.Input != 1 {
		t.Fatalf("failing input %d", te.Input)
	}
	// Wrong kind of input.
	wantError(t, tx(0, 10, Input{Content: &INotify{}}), stateAt(0), c, TEApplyNoMatchError)
	// A notify whose observation is false.
	n := whenCases(100, &Close{}, Case{Action: &Notify{Observation: &FalseObs{}}, Then: &Close{}})
	wantError(t, tx(0, 10, Input{Content: &INotify{}}), stateAt(0), n, TEApplyNoMatchError)
	// A choice outside its bounds, and one within.
	ch := whenCases(100, &Close{}, Case{Action: &Choice{Choice: ChoiceID{Name: []byte("c"), Owner: a}, Bounds: []Bound{{From: bi(1), To: bi(2)}, {From: bi(5), To: bi(5)}}}, Then: &Close{}})
	wantError(t, tx(0, 10, choiceInput("c", a, 3)), stateAt(0), ch, TEApplyNoMatchError)
	wantError(t, tx(0, 10, choiceInput("c", role("b"), 5)), stateAt(0), ch, TEApplyNoMatchError)
	wantOutput(t, tx(0, 10, choiceInput("c", a, 5)), stateAt(0), ch,
		`{"contract":"close","payments":[],"state":{"accounts":[],"boundValues":[],"choices":[[{"choice_name":"c","choice_owner":{"role_token":"a"}},5]],"minTime":0},"warnings":[]}`)
}

func TestDivisionRounding(t *testing.T) {
	env := Environment{TimeInterval: span(0, 0)}
	st := stateAt(0)
	for _, c := range []struct{ n, d, want int64 }{
		{7, 2, 3}, {-7, 2, -3}, {7, -2, -3}, {-7, -2, 3}, {1, 3, 0}, {-1, 3, 0}, {6, 3, 2}, {7, 0, 0}, {0, 0, 0}, {-7, 0, 0},
	} {
		got, err := EvalValue(env, &st, &DivValue{Left: cst(c.n), Right: cst(c.d)})
		if err != nil || got.Int64() != c.want {
			t.Errorf("%d / %d = %v, want %d (%v)", c.n, c.d, got, c.want, err)
		}
	}
	// Big operands.
	huge, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	got, _ := EvalValue(env, &st, &DivValue{Left: &Constant{N: huge}, Right: cst(1000)})
	if got.String() != "-123456789012345678901234567" {
		t.Fatalf("big quotient %v", got)
	}
}

func TestEvalDefaultsAndArithmetic(t *testing.T) {
	a := role("a")
	env := Environment{TimeInterval: span(10, 20)}
	st := State{
		Accounts:    []AccountEntry{acct(a, ada, 7)},
		Choices:     []ChoiceEntry{{Choice: ChoiceID{Name: []byte("c"), Owner: a}, Value: bi(4)}},
		BoundValues: []BoundValueEntry{{Name: ValueID{Name: []byte("x")}, Value: bi(-2)}},
		MinTime:     bi(0),
	}
	cid := ChoiceID{Name: []byte("c"), Owner: a}
	other := ChoiceID{Name: []byte("c"), Owner: role("b")}
	for i, c := range []struct {
		v    Value
		want int64
	}{
		{&AvailableMoney{Account: a, Token: ada}, 7},
		{&AvailableMoney{Account: a, Token: dollar}, 0},
		{&AvailableMoney{Account: role("b"), Token: ada}, 0},
		{&ChoiceValue{Choice: cid}, 4},
		{&ChoiceValue{Choice: other}, 0},
		{&UseValue{Name: ValueID{Name: []byte("x")}}, -2},
		{&UseValue{Name: ValueID{Name: []byte("y")}}, 0},
		{&NegValue{Value: cst(3)}, -3},
		{&AddValue{Left: cst(3), Right: cst(4)}, 7},
		{&SubValue{Left: cst(3), Right: cst(4)}, -1},
		{&MulValue{Left: cst(3), Right: cst(-4)}, -12},
		{&TimeIntervalStart{}, 10},
		{&TimeIntervalEnd{}, 20},
		{&Cond{Observation: &ChoseSomething{Choice: cid}, Then: cst(1), Else: cst(2)}, 1},
		{&Cond{Observation: &ChoseSomething{Choice: other}, Then: cst(1), Else: cst(2)}, 2},
	} {
		got, err := EvalValue(env, &st, c.v)
		if err != nil || got.Int64() != c.want {
			t.Errorf("case %d: got %v (%v), want %d", i, got, err, c.want)
		}
	}
	for i, c := range []struct {
		o    Observation
		want bool
	}{
		{&ValueGE{Left: cst(2), Right: cst(2)}, true},
		{&ValueGT{Left: cst(2), Right: cst(2)}, false},
		{&ValueLT{Left: cst(1), Right: cst(2)}, true},
		{&ValueLE{Left: cst(3), Right: cst(2)}, false},
		{&ValueEQ{Left: cst(2), Right: cst(2)}, true},
		{&AndObs{Left: &TrueObs{}, Right: &FalseObs{}}, false},
		{&OrObs{Left: &FalseObs{}, Right: &TrueObs{}}, true},
		{&NotObs{Observation: &FalseObs{}}, true},
	} {
		got, err := EvalObservation(env, &st, c.o)
		if err != nil || got != c.want {
			t.Errorf("observation %d: got %v (%v)", i, got, err)
		}
	}
}

func TestPayWarnings(t *testing.T) {
	a, b := role("a"), role("b")
	st := stateAt(0, acct(a, ada, 5), acct(b, ada, 1))
	// A partial pay into an account: the whole balance moves, the emptied
	// account disappears, the payee's account keeps its place.
	partial := &Pay{From: a, To: toAccount(b), Token: ada, Value: cst(8), Then: whenCases(100, &Close{})}
	wantOutput(t, tx(0, 10), st, partial,
		`{"contract":{"timeout":100,"timeout_continuation":"close","when":[]},`+
			`"payments":[{"amount":5,"payment_from":{"role_token":"a"},"to":{"account":{"role_token":"b"}},"token":`+adaJSON+`}],`+
			`"state":{"accounts":[[[{"role_token":"b"},`+adaJSON+`],6]],"boundValues":[],"choices":[],"minTime":0},`+
			`"warnings":[{"account":{"role_token":"a"},"asked_to_pay":8,"but_only_paid":5,"of_token":`+adaJSON+`,"to_payee":{"account":{"role_token":"b"}}}]}`)
	// Paying from an empty account pays 0, with a partial pay warning.
	empty := &Pay{From: role("c"), To: toParty(b), Token: ada, Value: cst(3), Then: whenCases(100, &Close{})}
	out := wantOutput(t, tx(0, 10), st, empty,
		`{"contract":{"timeout":100,"timeout_continuation":"close","when":[]},`+
			`"payments":[{"amount":0,"payment_from":{"role_token":"c"},"to":{"party":{"role_token":"b"}},"token":`+adaJSON+`}],`+
			`"state":{"accounts":[[[{"role_token":"a"},`+adaJSON+`],5],[[{"role_token":"b"},`+adaJSON+`],1]],"boundValues":[],"choices":[],"minTime":0},`+
			`"warnings":[{"account":{"role_token":"c"},"asked_to_pay":3,"but_only_paid":0,"of_token":`+adaJSON+`,"to_payee":{"party":{"role_token":"b"}}}]}`)
	if _, ok := out.Warnings[0].(*TransactionPartialPay); !ok {
		t.Fatalf("warning %T", out.Warnings[0])
	}
	// A non-positive pay pays nothing.
	neg := &Pay{From: a, To: toParty(b), Token: ada, Value: cst(-2), Then: whenCases(100, &Close{})}
	wantOutput(t, tx(0, 10), st, neg,
		`{"contract":{"timeout":100,"timeout_continuation":"close","when":[]},"payments":[],`+
			`"state":{"accounts":[[[{"role_token":"a"},`+adaJSON+`],5],[[{"role_token":"b"},`+adaJSON+`],1]],"boundValues":[],"choices":[],"minTime":0},`+
			`"warnings":[{"account":{"role_token":"a"},"asked_to_pay":-2,"of_token":`+adaJSON+`,"to_payee":{"party":{"role_token":"b"}}}]}`)
	// A full pay to a new account appends it; the paying account keeps its place.
	full := &Pay{From: a, To: toAccount(role("d")), Token: ada, Value: cst(2), Then: whenCases(100, &Close{})}
	wantOutput(t, tx(0, 10), st, full,
		`{"contract":{"timeout":100,"timeout_continuation":"close","when":[]},`+
			`"payments":[{"amount":2,"payment_from":{"role_token":"a"},"to":{"account":{"role_token":"d"}},"token":`+adaJSON+`}],`+
			`"state":{"accounts":[[[{"role_token":"a"},`+adaJSON+`],3],[[{"role_token":"b"},`+adaJSON+`],1],[[{"role_token":"d"},`+adaJSON+`],2]],"boundValues":[],"choices":[],"minTime":0},"warnings":[]}`)
	// The caller's state is untouched.
	if len(st.Accounts) != 2 || st.Accounts[0].Amount.Int64() != 5 || st.Accounts[1].Amount.Int64() != 1 {
		t.Fatalf("caller's state changed: %+v", st)
	}
}

func TestDeposits(t *testing.T) {
	a, b := role("a"), role("b")
	// A negative deposit the contract asks for is accepted with a warning and
	// changes no account.
	neg := whenCases(100, &Close{}, Case{Action: &Deposit{IntoAccount: a, From: b, Token: ada, Amount: cst(-5)}, Then: whenCases(200, &Close{})})
	st := stateAt(0, acct(a, ada, 3))
	out := wantOutput(t, tx(0, 10, depositInput(a, b, ada, -5)), st, neg,
		`{"contract":{"timeout":200,"timeout_continuation":"close","when":[]},"payments":[],`+
			`"state":{"accounts":[[[{"role_token":"a"},`+adaJSON+`],3]],"boundValues":[],"choices":[],"minTime":0},`+
			`"warnings":[{"asked_to_deposit":-5,"in_account":{"role_token":"a"},"of_token":`+adaJSON+`,"party":{"role_token":"b"}}]}`)
	if w, ok := out.Warnings[0].(*TransactionNonPositiveDeposit); !ok || w.Amount.Int64() != -5 {
		t.Fatalf("warning %#v", out.Warnings[0])
	}
	// A zero deposit into a missing account creates no account.
	zero := whenCases(100, &Close{}, Case{Action: &Deposit{IntoAccount: b, From: b, Token: ada, Amount: cst(0)}, Then: whenCases(200, &Close{})})
	wantOutput(t, tx(0, 10, depositInput(b, b, ada, 0)), st, zero,
		`{"contract":{"timeout":200,"timeout_continuation":"close","when":[]},"payments":[],`+
			`"state":{"accounts":[[[{"role_token":"a"},`+adaJSON+`],3]],"boundValues":[],"choices":[],"minTime":0},`+
			`"warnings":[{"asked_to_deposit":0,"in_account":{"role_token":"b"},"of_token":`+adaJSON+`,"party":{"role_token":"b"}}]}`)
	// Deposits update an existing account in place and append new ones.
	st = stateAt(0, acct(a, ada, 3), acct(b, ada, 1))
	two := whenCases(100, &Close{},
		Case{Action: &Deposit{IntoAccount: a, From: a, Token: dollar, Amount: cst(4)}, Then: whenCases(100, &Close{},
			Case{Action: &Deposit{IntoAccount: a, From: b, Token: ada, Amount: &AvailableMoney{Account: a, Token: dollar}}, Then: whenCases(300, &Close{})})})
	wantOutput(t, tx(0, 10, depositInput(a, a, dollar, 4), depositInput(a, b, ada, 4)), st, two,
		`{"contract":{"timeout":300,"timeout_continuation":"close","when":[]},"payments":[],`+
			`"state":{"accounts":[[[{"role_token":"a"},`+adaJSON+`],7],[[{"role_token":"b"},`+adaJSON+`],1],[[{"role_token":"a"},{"currency_symbol":"85bb","token_name":"dollar"}],4]],"boundValues":[],"choices":[],"minTime":0},"warnings":[]}`)
}

func TestLetShadowingAndAssert(t *testing.T) {
	x, y := ValueID{Name: []byte("x")}, ValueID{Name: []byte("y")}
	c := &Let{Name: x, Value: cst(1), Then: &Let{Name: y, Value: cst(2), Then: &Let{Name: x, Value: &AddValue{Left: &UseValue{Name: x}, Right: cst(10)},
		Then: &Assert{Observation: &ValueEQ{Left: &UseValue{Name: x}, Right: cst(0)}, Then: whenCases(100, &Close{})}}}}
	out := wantOutput(t, tx(0, 10), stateAt(0), c,
		`{"contract":{"timeout":100,"timeout_continuation":"close","when":[]},"payments":[],`+
			`"state":{"accounts":[],"boundValues":[["x",11],["y",2]],"choices":[],"minTime":0},`+
			`"warnings":[{"had_value":1,"is_now_assigned":11,"value_id":"x"},"assertion_failed"]}`)
	if s, ok := out.Warnings[0].(*TransactionShadowing); !ok || s.OldValue.Int64() != 1 || s.NewValue.Int64() != 11 {
		t.Fatalf("warning %#v", out.Warnings[0])
	}
	if _, ok := out.Warnings[1].(*TransactionAssertionFailed); !ok {
		t.Fatalf("warning %#v", out.Warnings[1])
	}
	// A true assertion warns nothing.
	ok := &Assert{Observation: &TrueObs{}, Then: whenCases(100, &Close{})}
	wantOutput(t, tx(0, 10), stateAt(0), ok,
		`{"contract":{"timeout":100,"timeout_continuation":"close","when":[]},"payments":[],"state":{"accounts":[],"boundValues":[],"choices":[],"minTime":0},"warnings":[]}`)
}

func TestChoiceOrder(t *testing.T) {
	a := role("a")
	bounds := []Bound{{From: bi(0), To: bi(100)}}
	loop := func(name string, then Contract) Case {
		return Case{Action: &Choice{Choice: ChoiceID{Name: []byte(name), Owner: a}, Bounds: bounds}, Then: then}
	}
	inner := whenCases(300, &Close{}, loop("p", whenCases(300, &Close{})))
	c := whenCases(100, &Close{}, loop("p", whenCases(200, &Close{}, loop("q", inner))))
	// p, then q, then p again: p is updated in place, q stays after it.
	wantOutput(t, tx(0, 10, choiceInput("p", a, 1), choiceInput("q", a, 2), choiceInput("p", a, 3)), stateAt(0), c,
		`{"contract":{"timeout":300,"timeout_continuation":"close","when":[]},"payments":[],"state":{"accounts":[],"boundValues":[],`+
			`"choices":[[{"choice_name":"p","choice_owner":{"role_token":"a"}},3],[{"choice_name":"q","choice_owner":{"role_token":"a"}},2]],"minTime":0},"warnings":[]}`)
}

func TestMerkleizedInputs(t *testing.T) {
	a := role("a")
	cont := &Pay{From: a, To: toParty(a), Token: ada, Value: cst(1), Then: &Close{}}
	h := ContinuationHash(cont)
	other := ContinuationHash(&Close{})
	dep := &Deposit{IntoAccount: a, From: a, Token: ada, Amount: cst(5)}
	merk := whenCases(100, &Close{}, Case{Action: dep, MerkleizedThen: h[:]})
	plain := whenCases(100, &Close{}, Case{Action: dep, Then: cont})
	in := depositInput(a, a, ada, 5)
	min := in
	min.ContinuationHash, min.Continuation = h[:], cont

	// The hash matches: the continuation runs (pays 1, refunds 4).
	out := wantOutput(t, tx(0, 10, min), stateAt(0), merk,
		`{"contract":"close","payments":[`+
			`{"amount":1,"payment_from":{"role_token":"a"},"to":{"party":{"role_token":"a"}},"token":`+adaJSON+`},`+
			`{"amount":4,"payment_from":{"role_token":"a"},"to":{"party":{"role_token":"a"}},"token":`+adaJSON+`}],`+
			`"state":{"accounts":[],"boundValues":[],"choices":[],"minTime":0},"warnings":[]}`)
	checkDataRoundTrip(t, "merkleized", out.Contract, &out.State)

	mismatch := func(what string, input Input, c Contract) {
		t.Helper()
		te := wantError(t, tx(0, 10, input), stateAt(0), c, TEHashMismatch)
		if te.Input != 0 || te.Detail == "" || mustJSON(t, te) != `"TEHashMismatch"` {
			t.Fatalf("%s: %v", what, te)
		}
	}
	// A different hash.
	wrong := min
	wrong.ContinuationHash = other[:]
	wrong.Continuation = &Close{}
	mismatch("other hash", wrong, merk)
	// The right hash but no resolved continuation.
	unresolved := min
	unresolved.Continuation = nil
	mismatch("unresolved", unresolved, merk)
	// The right hash but a continuation that does not hash to it.
	forged := min
	forged.Continuation = &Close{}
	mismatch("forged continuation", forged, merk)
	// A plain input for a merkleized case, and the other way round.
	mismatch("plain input", in, merk)
	mismatch("merkleized input", min, plain)

	// A case whose action does not match is skipped before the hash matters:
	// the merkleized input reaches the second, merkleized, case.
	first := whenCases(100, &Close{},
		Case{Action: &Deposit{IntoAccount: a, From: a, Token: ada, Amount: cst(6)}, Then: &Close{}},
		Case{Action: dep, MerkleizedThen: h[:]})
	wantOutput(t, tx(0, 10, min), stateAt(0), first,
		`{"contract":"close","payments":[`+
			`{"amount":1,"payment_from":{"role_token":"a"},"to":{"party":{"role_token":"a"}},"token":`+adaJSON+`},`+
			`{"amount":4,"payment_from":{"role_token":"a"},"to":{"party":{"role_token":"a"}},"token":`+adaJSON+`}],`+
			`"state":{"accounts":[],"boundValues":[],"choices":[],"minTime":0},"warnings":[]}`)
	// A matching action with a mismatching continuation stops the search:
	// the reference does not try later cases.
	stops := whenCases(100, &Close{}, Case{Action: dep, MerkleizedThen: other[:]}, Case{Action: dep, MerkleizedThen: h[:]})
	mismatch("first matching case decides", min, stops)

	// A merkleized notify.
	notify := whenCases(100, &Close{}, Case{Action: &Notify{Observation: &TrueObs{}}, MerkleizedThen: other[:]})
	wantOutput(t, tx(0, 10, Input{Content: &INotify{}, ContinuationHash: other[:], Continuation: &Close{}}), stateAt(0, acct(a, ada, 2)), notify,
		`{"contract":"close","payments":[{"amount":2,"payment_from":{"role_token":"a"},"to":{"party":{"role_token":"a"}},"token":`+adaJSON+`}],`+
			`"state":{"accounts":[],"boundValues":[],"choices":[],"minTime":0},"warnings":[]}`)
}

func TestMalformed(t *testing.T) {
	for name, c := range map[string]Contract{
		"nil contract":     nil,
		"nil continuation": &Assert{Observation: &TrueObs{}},
		"nil value":        &Let{Name: ValueID{Name: []byte("x")}, Then: &Close{}},
		"nil constant":     &Let{Name: ValueID{Name: []byte("x")}, Value: &Constant{}, Then: &Close{}},
		"nil timeout":      &When{TimeoutContinuation: &Close{}},
	} {
		_, err := ComputeTransaction(tx(0, 10), stateAt(0), c)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if _, err := ComputeTransaction(TransactionInput{Interval: TimeInterval{From: bi(0)}}, stateAt(0), &Close{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("nil interval end: %v", err)
	}
	if _, err := ComputeTransaction(tx(0, 10), State{}, &Close{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("nil minTime: %v", err)
	}
	c := whenCases(100, &Close{}, Case{Action: &Notify{Observation: &TrueObs{}}, Then: &Close{}})
	if _, err := ComputeTransaction(tx(0, 10, Input{}), stateAt(0), c); !errors.Is(err, ErrMalformed) {
		t.Errorf("nil input content: %v", err)
	}
	if _, err := EvalValue(Environment{}, &State{}, cst(1)); !errors.Is(err, ErrMalformed) {
		t.Errorf("EvalValue without interval: %v", err)
	}
}

func TestPlayTrace(t *testing.T) {
	a := role("a")
	c := whenCases(100, &Close{}, Case{Action: &Deposit{IntoAccount: a, From: a, Token: ada, Amount: cst(5)},
		Then: &Pay{From: a, To: toParty(role("b")), Token: ada, Value: cst(2), Then: whenCases(200, &Close{})}})
	out, err := PlayTrace(bi(0), c, []TransactionInput{tx(0, 10, depositInput(a, a, ada, 5)), tx(200, 300)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Payments) != 2 || out.Payments[0].Amount.Int64() != 2 || out.Payments[1].Amount.Int64() != 3 {
		t.Fatalf("payments %+v", out.Payments)
	}
	if _, ok := out.Contract.(*Close); !ok || len(out.State.Accounts) != 0 || out.State.MinTime.Int64() != 200 {
		t.Fatalf("final %+v", out)
	}
	_, err = PlayTrace(bi(0), c, []TransactionInput{tx(0, 10, depositInput(a, a, ada, 5)), tx(20, 30)})
	var te *TransactionError
	if !errors.As(err, &te) || te.Kind != TEUselessTransaction || !strings.Contains(err.Error(), "transaction 1") {
		t.Fatalf("got %v", err)
	}
}

func TestSemanticsJSON(t *testing.T) {
	a := role("a")
	addr, err := ParsePartyAddress("addr_test1vq9prvx8ufwutkwxx9cmmuuajaqmjqwujqlp9d8pvg6gupczgtm9j")
	if err != nil {
		t.Fatal(err)
	}
	ap := Party{Address: addr}
	warnings := []TransactionWarning{
		&TransactionNonPositiveDeposit{Party: a, Account: ap, Token: dollar, Amount: bi(-1)},
		&TransactionNonPositivePay{Account: a, Payee: toAccount(ap), Token: ada, Amount: bi(0)},
		&TransactionPartialPay{Account: ap, Payee: toParty(a), Token: ada, Paid: bi(3), Expected: bi(12345678901234567)},
		&TransactionShadowing{Name: ValueID{Name: []byte("x")}, OldValue: bi(1), NewValue: bi(-2)},
		&TransactionAssertionFailed{},
	}
	wantWarnings := []string{
		`{"asked_to_deposit":-1,"in_account":{"address":"addr_test1vq9prvx8ufwutkwxx9cmmuuajaqmjqwujqlp9d8pvg6gupczgtm9j"},"of_token":{"currency_symbol":"85bb","token_name":"dollar"},"party":{"role_token":"a"}}`,
		`{"account":{"role_token":"a"},"asked_to_pay":0,"of_token":` + adaJSON + `,"to_payee":{"account":{"address":"addr_test1vq9prvx8ufwutkwxx9cmmuuajaqmjqwujqlp9d8pvg6gupczgtm9j"}}}`,
		`{"account":{"address":"addr_test1vq9prvx8ufwutkwxx9cmmuuajaqmjqwujqlp9d8pvg6gupczgtm9j"},"asked_to_pay":12345678901234567,"but_only_paid":3,"of_token":` + adaJSON + `,"to_payee":{"party":{"role_token":"a"}}}`,
		`{"had_value":1,"is_now_assigned":-2,"value_id":"x"}`,
		`"assertion_failed"`,
	}
	for i, w := range warnings {
		got := mustJSON(t, w.(json.Marshaler))
		if got != wantWarnings[i] {
			t.Errorf("warning %d:\ngot  %s\nwant %s", i, got, wantWarnings[i])
		}
		back, err := ParseTransactionWarningJSON([]byte(got))
		if err != nil || !reflect.DeepEqual(back, w) {
			t.Errorf("warning %d back: %#v %v", i, back, err)
		}
		// encoding/json uses the MarshalJSON methods.
		if std, err := json.Marshal(w); err != nil || string(std) != got {
			t.Errorf("warning %d via encoding/json: %s %v", i, std, err)
		}
	}
	p := Payment{From: a, To: toParty(ap), Token: dollar, Amount: bi(42)}
	pj := mustJSON(t, p)
	if pj != `{"amount":42,"payment_from":{"role_token":"a"},"to":{"party":{"address":"addr_test1vq9prvx8ufwutkwxx9cmmuuajaqmjqwujqlp9d8pvg6gupczgtm9j"}},"token":{"currency_symbol":"85bb","token_name":"dollar"}}` {
		t.Fatalf("payment %s", pj)
	}
	if back, err := ParsePaymentJSON([]byte(pj)); err != nil || !reflect.DeepEqual(back, p) {
		t.Fatalf("payment back %+v %v", back, err)
	}

	for _, te := range []*TransactionError{
		{Kind: TEAmbiguousTimeIntervalError, Input: -1},
		{Kind: TEApplyNoMatchError, Input: -1},
		{Kind: TEUselessTransaction, Input: -1},
		{Kind: TEHashMismatch, Input: -1},
		{Kind: TEIntervalError, Input: -1, IntervalError: &IntervalError{Kind: InvalidInterval, Interval: span(5, 4)}},
		{Kind: TEIntervalError, Input: -1, IntervalError: &IntervalError{Kind: IntervalInPastError, MinTime: bi(9), Interval: span(1, 2)}},
	} {
		js, err := TransactionResultJSON(nil, te)
		if err != nil {
			t.Fatal(err)
		}
		out, back, err := ParseTransactionOutputJSON(js)
		if err != nil || out != nil || !reflect.DeepEqual(back, te) {
			t.Fatalf("%s: back %v %v %v", js, out, back, err)
		}
		inner := mustJSON(t, te)
		if string(js) != `{"transaction_error":`+inner+`}` {
			t.Fatalf("result JSON %s", js)
		}
		if back, err := ParseTransactionErrorJSON([]byte(inner)); err != nil || !reflect.DeepEqual(back, te) {
			t.Fatalf("%s: %v %v", inner, back, err)
		}
	}
	if ie, err := ParseIntervalErrorJSON([]byte(`{"intervalInPastError":{"minTime":3,"from":1,"to":2}}`)); err != nil || ie.Kind != IntervalInPastError || ie.MinTime.Int64() != 3 {
		t.Fatalf("interval error %v %v", ie, err)
	}

	out := &TransactionOutput{Warnings: warnings, Payments: []Payment{p}, State: stateAt(7, acct(a, ada, 1)), Contract: &Close{}}
	js, err := TransactionResultJSON(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	back, txErr, err := ParseTransactionOutputJSON(js)
	if err != nil || txErr != nil {
		t.Fatal(err, txErr)
	}
	if again := mustJSON(t, back); again != string(js) {
		t.Fatalf("output round trip\n%s\n%s", js, again)
	}
	if !strings.HasPrefix(string(js), `{"contract":"close","payments":[{"amount":42,`) {
		t.Fatalf("output %s", js)
	}
	// Other errors pass through TransactionResultJSON.
	if _, err := TransactionResultJSON(nil, ErrMalformed); err != ErrMalformed {
		t.Fatalf("got %v", err)
	}

	for _, bad := range []string{
		`{"amount":1,"payment_from":{"role_token":"a"},"to":{"party":{"role_token":"a"}}}`,
		`"assertion_failedx"`,
		`{"account":{"role_token":"a"},"asked_to_pay":1.5,"of_token":` + adaJSON + `,"to_payee":{"party":{"role_token":"a"}}}`,
		`{"error":"TEUselessTransaction","context":{}}`,
		`"TEIntervalError"`,
		`{"warnings":[],"payments":[],"state":{}}`,
	} {
		_, e1 := ParsePaymentJSON([]byte(bad))
		_, e2 := ParseTransactionWarningJSON([]byte(bad))
		_, e3 := ParseTransactionErrorJSON([]byte(bad))
		_, _, e4 := ParseTransactionOutputJSON([]byte(bad))
		if e1 == nil || e2 == nil || e3 == nil || e4 == nil {
			t.Errorf("%s accepted: %v %v %v %v", bad, e1, e2, e3, e4)
		}
	}
}

// A generator of random contracts, states and inputs over a few parties,
// tokens, choices and names, for the property test.
type semGen struct {
	r       *rand.Rand
	parties []Party
	tokens  []Token
	names   []ValueID
	choices []ChoiceID
	// conts holds the continuations of the merkleized cases generated so
	// far, by hash, as a transaction's datums would.
	conts map[[32]byte]Contract
}

func newSemGen(t *testing.T, seed uint64) *semGen {
	addr, err := ParsePartyAddress("addr_test1vq9prvx8ufwutkwxx9cmmuuajaqmjqwujqlp9d8pvg6gupczgtm9j")
	if err != nil {
		t.Fatal(err)
	}
	g := &semGen{
		r:       rand.New(rand.NewPCG(seed, 7)),
		parties: []Party{role("a"), role("b"), {Address: addr}},
		tokens:  []Token{ada, dollar},
		names:   []ValueID{{Name: []byte("x")}, {Name: []byte("y")}},
		conts:   map[[32]byte]Contract{},
	}
	for _, p := range g.parties {
		g.choices = append(g.choices, ChoiceID{Name: []byte("c"), Owner: p})
	}
	return g
}

func (g *semGen) party() Party         { return g.parties[g.r.IntN(len(g.parties))] }
func (g *semGen) token() Token         { return g.tokens[g.r.IntN(len(g.tokens))] }
func (g *semGen) choice() ChoiceID     { return g.choices[g.r.IntN(len(g.choices))] }
func (g *semGen) name() ValueID        { return g.names[g.r.IntN(len(g.names))] }
func (g *semGen) small() int64         { return g.r.Int64N(21) - 5 }
func (g *semGen) time(now int64) int64 { return now + g.r.Int64N(60) }

func (g *semGen) value(depth int) Value {
	if depth <= 0 {
		switch g.r.IntN(5) {
		case 0:
			return &AvailableMoney{Account: g.party(), Token: g.token()}
		case 1:
			return &ChoiceValue{Choice: g.choice()}
		case 2:
			return &UseValue{Name: g.name()}
		default:
			return cst(g.small())
		}
	}
	switch g.r.IntN(9) {
	case 0:
		return &NegValue{Value: g.value(depth - 1)}
	case 1:
		return &AddValue{Left: g.value(depth - 1), Right: g.value(depth - 1)}
	case 2:
		return &SubValue{Left: g.value(depth - 1), Right: g.value(depth - 1)}
	case 3:
		return &MulValue{Left: g.value(depth - 1), Right: g.value(depth - 1)}
	case 4:
		return &DivValue{Left: g.value(depth - 1), Right: g.value(depth - 1)}
	case 5:
		return &Cond{Observation: g.observation(depth - 1), Then: g.value(depth - 1), Else: g.value(depth - 1)}
	case 6:
		if g.r.IntN(2) == 0 {
			return &TimeIntervalStart{}
		}
		return &TimeIntervalEnd{}
	}
	return g.value(0)
}

func (g *semGen) observation(depth int) Observation {
	if depth <= 0 {
		switch g.r.IntN(3) {
		case 0:
			return &ChoseSomething{Choice: g.choice()}
		case 1:
			return &TrueObs{}
		}
		return &FalseObs{}
	}
	l, r := g.value(depth-1), g.value(depth-1)
	switch g.r.IntN(8) {
	case 0:
		return &AndObs{Left: g.observation(depth - 1), Right: g.observation(depth - 1)}
	case 1:
		return &OrObs{Left: g.observation(depth - 1), Right: g.observation(depth - 1)}
	case 2:
		return &NotObs{Observation: g.observation(depth - 1)}
	case 3:
		return &ValueGE{Left: l, Right: r}
	case 4:
		return &ValueGT{Left: l, Right: r}
	case 5:
		return &ValueLT{Left: l, Right: r}
	case 6:
		return &ValueLE{Left: l, Right: r}
	}
	return &ValueEQ{Left: l, Right: r}
}

func (g *semGen) contract(depth int, now int64) Contract {
	if depth <= 0 {
		return &Close{}
	}
	switch g.r.IntN(6) {
	case 0:
		payee := Payee{Kind: PayeeKind(g.r.IntN(2)), Party: g.party()}
		return &Pay{From: g.party(), To: payee, Token: g.token(), Value: g.value(2), Then: g.contract(depth-1, now)}
	case 1:
		return &If{Observation: g.observation(2), Then: g.contract(depth-1, now), Else: g.contract(depth-1, now)}
	case 2:
		return &Let{Name: g.name(), Value: g.value(2), Then: g.contract(depth-1, now)}
	case 3:
		return &Assert{Observation: g.observation(1), Then: g.contract(depth-1, now)}
	}
	timeout := g.time(now)
	w := &When{Timeout: bi(timeout), TimeoutContinuation: g.contract(depth-1, timeout)}
	for n := g.r.IntN(3) + 1; n > 0; n-- {
		var a Action
		switch g.r.IntN(3) {
		case 0:
			a = &Deposit{IntoAccount: g.party(), From: g.party(), Token: g.token(), Amount: g.value(1)}
		case 1:
			lo := g.small()
			a = &Choice{Choice: g.choice(), Bounds: []Bound{{From: bi(lo), To: bi(lo + g.r.Int64N(4))}}}
		default:
			a = &Notify{Observation: g.observation(1)}
		}
		g.addCase(w, a, g.contract(depth-1, now))
	}
	return w
}

// addCase adds the case a then to w, merkleized one time in four (its
// continuation kept in g.conts).
func (g *semGen) addCase(w *When, a Action, then Contract) {
	cs := Case{Action: a, Then: then}
	if g.r.IntN(4) == 0 {
		h := ContinuationHash(then)
		g.conts[h] = then
		cs.Then, cs.MerkleizedThen = nil, h[:]
	}
	w.Cases = append(w.Cases, cs)
}

func (g *semGen) state(minTime int64) State {
	st := stateAt(minTime)
	for _, p := range g.parties {
		for _, tok := range g.tokens {
			if g.r.IntN(2) == 0 {
				st.Accounts = append(st.Accounts, acct(p, tok, g.r.Int64N(20)+1))
			}
		}
	}
	return st
}

// input builds an input that the quiescent contract c probably accepts:
// mostly one derived from one of its cases, sometimes a random one.
func (g *semGen) input(t *testing.T, env Environment, st State, c Contract) Input {
	w, ok := c.(*When)
	if !ok || len(w.Cases) == 0 || g.r.IntN(8) == 0 {
		return choiceInput("c", g.party(), g.small())
	}
	cs := w.Cases[g.r.IntN(len(w.Cases))]
	var in Input
	switch a := cs.Action.(type) {
	case *Deposit:
		amount, err := EvalValue(env, &st, a.Amount)
		if err != nil {
			t.Fatal(err)
		}
		in.Content = &IDeposit{IntoAccount: a.IntoAccount, From: a.From, Token: a.Token, Amount: amount}
	case *Choice:
		bd := a.Bounds[0]
		in.Content = &IChoice{Choice: a.Choice, ChosenNum: new(big.Int).Add(bd.From, bi(g.r.Int64N(bd.To.Int64()-bd.From.Int64()+1)))}
	default:
		in.Content = &INotify{}
	}
	if cs.Merkleized() {
		in.ContinuationHash = cs.MerkleizedThen
		var h [32]byte
		copy(h[:], cs.MerkleizedThen)
		in.Continuation = g.conts[h]
	}
	return in
}

// balances sums amounts by token.
func balances(add map[string]*big.Int, tok Token, amount *big.Int, sign int) {
	k := string(tok.Currency) + "/" + string(tok.Name)
	if add[k] == nil {
		add[k] = new(big.Int)
	}
	if sign > 0 {
		add[k].Add(add[k], amount)
	} else {
		add[k].Sub(add[k], amount)
	}
}

// TestSemanticsProperties runs random transactions on random contracts and
// checks that every output contract and state round-trips through Plutus
// Data and JSON, that accounts stay positive and unique, and that money is
// conserved: the accounts before plus the positive deposits equal the
// accounts after plus what was paid out to parties.
func TestSemanticsProperties(t *testing.T) {
	g := newSemGen(t, 1)
	outputs, multi, failures := 0, 0, map[TransactionErrorKind]int{}
	for iter := 0; iter < 500; iter++ {
		now := int64(1000)
		c := g.contract(5, now)
		st := g.state(now)
		for step := 0; step < 6; step++ {
			from := now + g.r.Int64N(40) - 10
			iv := span(from, from+g.r.Int64N(30))
			// Inputs derived one after the other from the contract each
			// leaves behind; the last one may fail to apply.
			var inputs []Input
			env := Environment{TimeInterval: TimeInterval{From: maxInt(iv.From, st.MinTime), To: iv.To}}
			if r, err := Reduce(iv, st, c); err == nil && !isClose(r.Contract) {
				cur, curState := r.Contract, r.State
				for n := g.r.IntN(4); n > 0; n-- {
					inputs = append(inputs, g.input(t, env, curState, cur))
					o, err := ComputeTransaction(TransactionInput{Interval: iv, Inputs: inputs}, st, c)
					if err != nil {
						break
					}
					cur, curState = o.Contract, o.State
				}
			}
			tr := TransactionInput{Interval: iv, Inputs: inputs}
			before := mustJSON(t, &st)
			out, err := ComputeTransaction(tr, st, c)
			if after := mustJSON(t, &st); after != before {
				t.Fatalf("the caller's state changed:\n%s\n%s", before, after)
			}
			if err != nil {
				var te *TransactionError
				if !errors.As(err, &te) {
					t.Fatalf("unexpected error %v", err)
				}
				failures[te.Kind]++
				now += 7
				continue
			}
			outputs++
			where := fmt.Sprintf("iteration %d step %d", iter, step)
			checkDataRoundTrip(t, where, out.Contract, &out.State)
			js, err := TransactionResultJSON(out, nil)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			back, _, err := ParseTransactionOutputJSON(js)
			if err != nil || mustJSON(t, back) != string(js) {
				t.Fatalf("%s: output JSON round trip: %v\n%s", where, err, js)
			}
			// Positive, unique accounts.
			seen := map[string]bool{}
			for _, e := range out.State.Accounts {
				k := mustJSON(t, e.Party) + mustJSON(t, e.Token)
				if e.Amount.Sign() <= 0 || seen[k] {
					t.Fatalf("%s: bad account %s %v", where, k, e.Amount)
				}
				seen[k] = true
			}
			// Conservation of money.
			sum := map[string]*big.Int{}
			for _, e := range st.Accounts {
				balances(sum, e.Token, e.Amount, 1)
			}
			for _, in := range tr.Inputs {
				if d, ok := in.Content.(*IDeposit); ok && d.Amount.Sign() > 0 {
					balances(sum, d.Token, d.Amount, 1)
				}
			}
			for _, e := range out.State.Accounts {
				balances(sum, e.Token, e.Amount, -1)
			}
			for _, p := range out.Payments {
				if p.To.Kind == PayeeParty {
					balances(sum, p.Token, p.Amount, -1)
				}
			}
			for k, v := range sum {
				if v.Sign() != 0 {
					t.Fatalf("%s: token %q not conserved (%v)\n%s", where, k, v, js)
				}
			}
			if len(tr.Inputs) > 1 {
				multi++
			}
			st, c = out.State, out.Contract
			now = out.State.MinTime.Int64() + 5
			if isClose(c) {
				break
			}
		}
	}
	t.Logf("%d outputs checked, %d of several inputs; errors %v", outputs, multi, failures)
	if outputs < 500 || multi < 20 || failures[TEApplyNoMatchError] == 0 || failures[TEUselessTransaction] == 0 || failures[TEHashMismatch] == 0 {
		t.Fatalf("the generator exercised too little: %d outputs, errors %v", outputs, failures)
	}
}

func isClose(c Contract) bool {
	_, ok := c.(*Close)
	return ok
}

func maxInt(a, b *big.Int) *big.Int {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}
