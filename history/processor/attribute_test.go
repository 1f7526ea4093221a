package processor

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
	"github.com/marlowe-follower/follower/history/record"
)

// testStep is one contract step made up for a test: the spent datum and the
// outputs of the transaction applying no inputs to it (the contract pays
// and closes as it reduces).
type testStep struct {
	contract marlowe.Contract
	state    marlowe.State
	outputs  []block.TxOut
	roles    []int // indexes of outputs to the payout validator
	currency []byte
}

var (
	testTxID     = chain.Hash32{0xaa, 1}
	testContract = chain.TxOutRef{TxID: chain.Hash32{0xcc, 2}, Index: 1}
	payoutScript = marlowe.ScriptVersions[0].Payout
)

// process runs a step through the processor and returns its payload.
func (ts *testStep) process(t *testing.T) record.InputsApplied {
	t.Helper()
	md := marlowe.MarloweData{Params: marlowe.MarloweParams{RolesCurrency: ts.currency}, State: ts.state, Contract: ts.contract}
	start, ttl := uint64(1_000_000_000+1000), uint64(1_000_000_000+2000) // devnet slots: POSIX 1000 to 1999 ms
	tx := classify.MarloweTx{
		ID: testTxID, IsValid: true, ValidityStart: &start, TTL: &ttl, Outputs: ts.outputs,
		ContractInputs: []classify.ContractInput{{
			UTxO: classify.TrackedUTxO{Ref: testContract, Kind: classify.KindContract, ContractID: testContract,
				Version: marlowe.ScriptVersions[0].Name, Datum: pd.Encode(md.ToData())},
			Inputs: marlowe.Redeemer{},
		}},
	}
	for _, ix := range ts.roles {
		o := ts.outputs[ix]
		var datum marlowe.PayoutDatum
		dd, err := pd.Decode(o.InlineDatum)
		if err == nil {
			var p *marlowe.PayoutDatum
			p, err = marlowe.PayoutDatumFromData(dd)
			if p != nil {
				datum = *p
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		tx.Payouts = append(tx.Payouts, classify.PayoutOutput{Ref: chain.TxOutRef{TxID: testTxID, Index: uint32(ix)},
			Version: marlowe.ScriptVersions[0].Name, Address: o.Address, Value: o.Value, Datum: o.InlineDatum, Payout: &datum, ContractID: testContract})
	}
	p := New(devnetSlots, zap.NewNop(), nil)
	st := p.Process(&classify.RollForward{Header: chain.BlockHeader{Slot: 1, BlockNo: 1}, Txs: []classify.MarloweTx{tx}})
	if st == nil || len(st.Forward.Records) != 1 || st.Forward.Records[0].Kind != record.KindInputsApplied {
		t.Fatalf("records %+v", st)
	}
	var out record.InputsApplied
	mustUnmarshal(t, st.Forward.Records[0].Payload, &out)
	return out
}

func keyAddress(b byte) *marlowe.PartyAddress {
	h := make([]byte, 28)
	h[0], h[27] = 0x11, b
	return &marlowe.PartyAddress{Network: marlowe.Testnet, Address: marlowe.Address{Payment: marlowe.Credential{Kind: marlowe.PubKeyCredential, Hash: h}}}
}

func rawAddress(t *testing.T, a *marlowe.PartyAddress) []byte {
	t.Helper()
	b, err := a.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ada(n int64) *big.Int { return big.NewInt(n * 1_000_000) }

// pays is a contract paying each payment to its payee from the account of
// the same party and token, then closing.
func pays(ps ...marlowe.Payment) marlowe.Contract {
	var c marlowe.Contract = &marlowe.Close{}
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		c = &marlowe.Pay{From: p.From, To: p.To, Token: p.Token, Value: &marlowe.Constant{N: p.Amount}, Then: c}
	}
	return c
}

// TestMergedAddressPayout is issue 12's case: 100 and 400 ada to one address,
// paid in one output of 500 ada beside the wallet's change.
func TestMergedAddressPayout(t *testing.T) {
	a := marlowe.Party{Address: keyAddress(1)}
	to := marlowe.Payee{Kind: marlowe.PayeeParty, Party: a}
	ts := &testStep{
		contract: pays(marlowe.Payment{From: a, To: to, Amount: ada(100)}, marlowe.Payment{From: a, To: to, Amount: ada(400)}),
		state:    marlowe.State{Accounts: []marlowe.AccountEntry{{Party: a, Amount: ada(500)}}, MinTime: big.NewInt(0)},
		outputs: []block.TxOut{
			{Address: append([]byte{0x60}, make([]byte, 28)...), Value: block.Value{Lovelace: 7_000_000}},
			{Address: rawAddress(t, a.Address), Value: block.Value{Lovelace: 500_000_000}},
		},
	}
	p := ts.process(t)
	js, _ := json.Marshal(p.Payouts)
	addr, _ := a.Address.Bech32()
	from, _ := a.MarshalJSON()
	want := fmt.Sprintf(`[{"payoutId":"%s#1","address":"%s","assets":{"lovelace":500000000,"tokens":{}},`+
		`"payments":[{"from":%s,"assets":{"lovelace":100000000,"tokens":{}}},{"from":%s,"assets":{"lovelace":400000000,"tokens":{}}}]}]`,
		testTxID, addr, from, from)
	if string(js) != want {
		t.Fatalf("payouts\n %s\nwant\n %s", js, want)
	}

	// The same payments in two outputs, in the other order, and the payee's
	// change beside them: each payment keeps its output.
	ts.outputs = []block.TxOut{
		{Address: rawAddress(t, a.Address), Value: block.Value{Lovelace: 400_000_000}},
		{Address: rawAddress(t, a.Address), Value: block.Value{Lovelace: 12_000_000}},
		{Address: rawAddress(t, a.Address), Value: block.Value{Lovelace: 100_000_000}},
	}
	p = ts.process(t)
	if len(p.Payouts) != 2 || p.Payouts[0].Ref.Index != 0 || p.Payouts[1].Ref.Index != 2 ||
		p.Payouts[0].Payments[0].Assets.Lovelace != 400_000_000 || p.Payouts[1].Payments[0].Assets.Lovelace != 100_000_000 {
		t.Fatalf("payouts %+v", p.Payouts)
	}
	// No output to the address: the payments are shown without an id.
	ts.outputs = ts.outputs[:0]
	p = ts.process(t)
	if len(p.Payouts) != 2 || p.Payouts[0].Ref != nil || p.Payouts[0].Assets.Lovelace != 100_000_000 || len(p.Payouts[1].Payments) != 1 {
		t.Fatalf("payouts %+v", p.Payouts)
	}
}

// TestAttributeFallback: payments that no assignment of whole payments
// fits (a payment split over outputs) still go to an output that holds them.
func TestAttributeFallback(t *testing.T) {
	lovelace := func(qs ...int64) []holding {
		var hs []holding
		for _, q := range qs {
			hs = append(hs, holding{"": big.NewInt(q)})
		}
		return hs
	}
	shares := func(qs ...int64) []share {
		var ss []share
		for _, q := range qs {
			ss = append(ss, share{q: big.NewInt(q)})
		}
		return ss
	}
	for _, c := range []struct {
		pays, outs []int64
		want       []int
	}{
		{[]int64{100, 400}, []int64{500}, []int{0, 0}},
		{[]int64{100, 400}, []int64{400, 100}, []int{1, 0}},
		{[]int64{100, 400}, []int64{100, 400, 500}, []int{0, 1}}, // exact outputs first
		{[]int64{100, 400}, []int64{537, 37}, []int{0, 0}},       // change beside
		{[]int64{100, 400}, []int64{100, 437}, []int{0, 1}},      // change in the second
		{[]int64{100}, []int64{60, 40}, []int{0}},                // split: the output holding most
		{[]int64{100, 50}, []int64{60, 90}, []int{1, 0}},         // no whole fit
		{[]int64{0, 100, 0}, []int64{5, 100}, []int{1, 1, 1}},    // zeros go with the payee's output
		{[]int64{0}, []int64{5}, []int{-1}},                      // a zero alone needs no output
		{[]int64{100}, nil, []int{-1}},                           // no output
		{[]int64{3, 3, 3, 3}, []int64{6, 6}, []int{0, 0, 1, 1}},  // twins
		{[]int64{1, 2, 3, 4, 5, 6}, []int64{7, 7, 7}, []int{0, 1, 2, 2, 1, 0}},
	} {
		if got := attribute(shares(c.pays...), lovelace(c.outs...)); !slices.Equal(got, c.want) {
			t.Errorf("payments %v outputs %v: %v, want %v", c.pays, c.outs, got, c.want)
		}
	}
	// Tokens: an output holding only ada cannot carry a token payment.
	tok := assetKey([]byte{1}, []byte("t"))
	got := attribute([]share{{asset: tok, q: big.NewInt(5)}, {q: big.NewInt(2)}},
		[]holding{{"": big.NewInt(9)}, {"": big.NewInt(1), tok: big.NewInt(5)}})
	if !slices.Equal(got, []int{1, 0}) {
		t.Errorf("tokens: %v", got)
	}
	// Many payments to one payee: the search is bounded, the answer fits.
	var many []share
	var outs []holding
	for i := range 40 {
		many = append(many, share{q: big.NewInt(int64(i%7 + 1))})
		if i%4 == 0 {
			outs = append(outs, holding{"": big.NewInt(1000)})
		}
	}
	for i, o := range attribute(many, outs) {
		if o < 0 {
			t.Fatalf("payment %d not attributed", i)
		}
	}
}

// testPart is an output a test writes for some of a payee's payments.
type testPart struct {
	pays  []int // indexes in the semantics' payments
	value block.Value
	exact bool // holds exactly its payments
}

// TestAddressPayoutsProperty generates steps paying random payees (address
// parties and roles) random amounts of ada and tokens, writes their outputs
// the way wallets and the Runtime's builder do (a payee's payments merged in
// one output or split over several, the minimum ada beside tokens, the
// payee's own change in one of its outputs or beside them, other outputs,
// any order) and checks the record: every payment to a party is in exactly
// one payout, of its payee; each payout's assets are its output's, the
// output is the payee's and holds at least the payments it lists; payout ids
// are unique; only payments no output carries (here: zero payments) go
// without an id; and where a payee's outputs hold exactly their payments,
// each of them is the payout of payments summing to its value.
func TestAddressPayoutsProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 2))
	policies := [][]byte{make([]byte, 28), make([]byte, 28)}
	policies[0][0], policies[1][0] = 0x51, 0x52
	currency := make([]byte, 28)
	currency[0] = 0xee
	tokens := []marlowe.Token{{}, {}, {Currency: policies[0], Name: []byte("gold")}, {Currency: policies[0], Name: []byte("silver")}, {Currency: policies[1], Name: []byte{0xff, 0}}}
	merged, split, changed, unattributed, roles := 0, 0, 0, 0, 0
	for iter := range 1000 {
		// Parties: a few addresses and roles.
		var parties []marlowe.Party
		for k := range 1 + rng.IntN(4) {
			parties = append(parties, marlowe.Party{Address: keyAddress(byte(k))})
		}
		for k := range rng.IntN(3) {
			parties = append(parties, marlowe.Party{Role: []byte{'r', byte('a' + k)}})
		}
		// Payments out of accounts that hold what they pay; sometimes an
		// account holds nothing, and pays zero or what another left.
		var ps []marlowe.Payment
		balance := map[string]*big.Int{}
		var accounts []marlowe.AccountEntry
		for range 1 + rng.IntN(8) {
			from, to := parties[rng.IntN(len(parties))], parties[rng.IntN(len(parties))]
			tok := tokens[rng.IntN(len(tokens))]
			var amount *big.Int
			switch {
			case len(tok.Currency) > 0:
				amount = big.NewInt(1 + rng.Int64N(1000))
			case rng.IntN(4) == 0:
				amount = big.NewInt(1 + rng.Int64N(999_999)) // less than the minimum ada
			default:
				amount = big.NewInt((1 + rng.Int64N(500)) * 1_000_000)
			}
			ps = append(ps, marlowe.Payment{From: from, To: marlowe.Payee{Kind: marlowe.PayeeParty, Party: to}, Token: tok, Amount: amount})
			if rng.IntN(10) == 0 {
				continue
			}
			k := partyKey(t, from) + "/" + assetKey(tok.Currency, tok.Name)
			if balance[k] == nil {
				balance[k] = new(big.Int)
				accounts = append(accounts, marlowe.AccountEntry{Party: from, Token: tok, Amount: balance[k]})
			}
			balance[k].Add(balance[k], amount)
		}
		ts := &testStep{contract: pays(ps...), state: marlowe.State{Accounts: accounts, MinTime: big.NewInt(0)}, currency: currency}
		// What the semantics pay, Close's refunds included.
		md := marlowe.MarloweData{State: ts.state, Contract: ts.contract}
		again, err := marlowe.MarloweDataFromData(md.ToData())
		if err != nil {
			t.Fatal(err)
		}
		out, err := marlowe.ComputeTransaction(marlowe.TransactionInput{
			Interval: marlowe.TimeInterval{From: big.NewInt(1000), To: big.NewInt(1999)}}, again.State, again.Contract)
		if err != nil {
			t.Fatal(err)
		}
		// Each payee's positive payments in parts, an output each.
		parts := map[string][]*testPart{}
		var order []string
		payeeOf := map[string]marlowe.Party{}
		for i, pay := range out.Payments {
			if pay.To.Kind != marlowe.PayeeParty || pay.Amount.Sign() <= 0 {
				continue
			}
			k := partyKey(t, pay.To.Party)
			if parts[k] == nil {
				order = append(order, k)
				payeeOf[k] = pay.To.Party
			}
			ks := parts[k]
			switch {
			case len(ks) == 0:
				ks = append(ks, &testPart{pays: []int{i}})
			case pay.To.Party.Address == nil || rng.IntN(3) != 0:
				// A role is paid its total in one output (the validator
				// wants one holding it); an address most often too.
				j := 0
				if pay.To.Party.Address != nil && rng.IntN(3) == 0 {
					j = rng.IntN(len(ks))
				}
				ks[j].pays = append(ks[j].pays, i)
			default:
				ks = append(ks, &testPart{pays: []int{i}})
				split++
			}
			parts[k] = ks
		}
		var outputs []block.TxOut
		var roleOut []bool
		var written []*testPart // the part each output was written for, nil for others
		changeTo := ""
		if len(order) > 0 && rng.IntN(3) == 0 {
			if k := order[rng.IntN(len(order))]; payeeOf[k].Address != nil {
				changeTo = k
			}
		}
		for _, k := range order {
			party := payeeOf[k]
			for _, pt := range parts[k] {
				var v block.Value
				for _, i := range pt.pays {
					v = addValues(v, valueOfPayment(&out.Payments[i]))
				}
				minAda := uint64(1_000_000)
				if len(v.Assets) > 0 {
					minAda = 1_500_000
				}
				pt.exact = v.Lovelace >= minAda
				v.Lovelace = max(v.Lovelace, minAda)
				if len(pt.pays) > 1 {
					merged++
				}
				pt.value = v
				o := block.TxOut{Value: v}
				if party.Address != nil {
					o.Address = rawAddress(t, party.Address)
				} else {
					roles++
					datum := &marlowe.PayoutDatum{RolesCurrency: currency, Role: party.Role}
					o.Address, o.InlineDatum = append([]byte{0x70}, payoutScript[:]...), pd.Encode(datum.ToData())
				}
				outputs, roleOut, written = append(outputs, o), append(roleOut, party.Address == nil), append(written, pt)
			}
			if k != changeTo {
				continue
			}
			// The payee's own change: in one of its outputs or beside them,
			// sometimes with a token the wallet holds.
			changed++
			change := block.Value{Lovelace: 1_000_000 + rng.Uint64N(900_000_000)}
			if rng.IntN(3) == 0 {
				change.Assets = []block.Asset{{Policy: chain.Hash28(policies[rng.IntN(2)]), Name: []byte("gold"), Quantity: 1 + rng.Uint64N(50)}}
			}
			if rng.IntN(2) == 0 {
				j := len(outputs) - 1 - rng.IntN(len(parts[k]))
				outputs[j].Value = addValues(outputs[j].Value, change)
				written[j].value, written[j].exact = outputs[j].Value, false
			} else {
				outputs = append(outputs, block.TxOut{Address: rawAddress(t, party.Address), Value: change})
				roleOut, written = append(roleOut, false), append(written, nil)
			}
		}
		for range rng.IntN(3) { // other wallets
			outputs = append(outputs, block.TxOut{Address: rawAddress(t, keyAddress(byte(100+rng.IntN(50)))), Value: block.Value{Lovelace: rng.Uint64N(1 << 40)}})
			roleOut, written = append(roleOut, false), append(written, nil)
		}
		ts.outputs = make([]block.TxOut, len(outputs))
		writtenAt := make([]*testPart, len(outputs))
		for to, from := range rng.Perm(len(outputs)) {
			ts.outputs[to], writtenAt[to] = outputs[from], written[from]
			if roleOut[from] {
				ts.roles = append(ts.roles, to)
			}
		}
		slices.Sort(ts.roles)
		// A payee is clean when its outputs hold exactly its payments.
		clean := map[string]bool{}
		for _, k := range order {
			clean[k] = k != changeTo
			for _, pt := range parts[k] {
				clean[k] = clean[k] && pt.exact
			}
		}

		rec := ts.process(t)
		ctx := func() string {
			js, _ := json.Marshal(rec.Payouts)
			return fmt.Sprintf("step %d:\npayments %v\noutputs %+v\npayouts %s", iter, out.Payments, ts.outputs, js)
		}
		var want, got []string
		for _, pay := range out.Payments {
			if pay.To.Kind == marlowe.PayeeParty {
				from, _ := pay.From.MarshalJSON()
				a, _ := json.Marshal(paymentAssets(pay.Token, pay.Amount))
				want = append(want, partyKey(t, pay.To.Party)+" "+string(from)+" "+string(a))
			}
		}
		ids := map[chain.TxOutRef]bool{}
		for _, po := range rec.Payouts {
			key := ""
			switch {
			case po.Role != nil && po.Address == nil:
				key = "r" + *po.Role
			case po.Address != nil && po.Role == nil:
				key = "a" + *po.Address
			default:
				t.Fatalf("a payout to a role and an address\n%s", ctx())
			}
			sum := holding{}
			for _, pm := range po.Payments {
				a, _ := json.Marshal(pm.Assets)
				got = append(got, key+" "+string(pm.From)+" "+string(a))
				for k, q := range holdingOfAssets(t, pm.Assets) {
					if sum[k] == nil {
						sum[k] = new(big.Int)
					}
					sum[k].Add(sum[k], q)
				}
			}
			if po.Ref == nil {
				unattributed++
				if len(po.Payments) != 1 || !reflect.DeepEqual(po.Assets, po.Payments[0].Assets) || !empty(sum) || len(parts[key]) > 0 {
					t.Fatalf("a payout without an id: %+v\n%s", po, ctx())
				}
				continue
			}
			if ids[*po.Ref] || po.Ref.TxID != testTxID || int(po.Ref.Index) >= len(ts.outputs) {
				t.Fatalf("payout id %s twice or unknown\n%s", po.Ref, ctx())
			}
			ids[*po.Ref] = true
			o := ts.outputs[po.Ref.Index]
			if !reflect.DeepEqual(po.Assets, AssetsOf(o.Value)) {
				t.Fatalf("payout %s: assets %+v, output %+v\n%s", po.Ref, po.Assets, o.Value, ctx())
			}
			if po.Role != nil && !slices.Contains(ts.roles, int(po.Ref.Index)) ||
				po.Address != nil && string(o.Address) != string(rawAddress(t, payeeOf[key].Address)) {
				t.Fatalf("payout %s is not its payee's output\n%s", po.Ref, ctx())
			}
			if len(po.Payments) == 0 || !covers(holdingOf(o.Value), sum) {
				t.Fatalf("payout %s: the output does not hold its payments\n%s", po.Ref, ctx())
			}
			if clean[key] && !equalHolding(sum, holdingOf(o.Value)) {
				t.Fatalf("payout %s: payments %+v, not what its output holds\n%s", po.Ref, po.Payments, ctx())
			}
		}
		for ix, pt := range writtenAt {
			if pt != nil && clean[partyKey(t, out.Payments[pt.pays[0]].To.Party)] && !ids[chain.TxOutRef{TxID: testTxID, Index: uint32(ix)}] {
				t.Fatalf("output %d holds payments but is no payout\n%s", ix, ctx())
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			t.Fatalf("payments\n %v\nattributed\n %v\n%s", want, got, ctx())
		}
	}
	t.Logf("%d merged outputs, %d split payees, %d with change, %d role outputs, %d zero payments without an output", merged, split, changed, roles, unattributed)
	if merged == 0 || split == 0 || changed == 0 || roles == 0 || unattributed == 0 {
		t.Fatal("the generator missed a case")
	}
}

// partyKey names a payee as payouts show it.
func partyKey(t *testing.T, p marlowe.Party) string {
	t.Helper()
	if p.Address == nil {
		return "r" + marlowe.NameText(p.Role)
	}
	s, err := p.Address.Bech32()
	if err != nil {
		t.Fatal(err)
	}
	return "a" + s
}

// valueOfPayment is a payment as a ledger value.
func valueOfPayment(p *marlowe.Payment) block.Value {
	if len(p.Token.Currency) == 0 {
		return block.Value{Lovelace: p.Amount.Uint64()}
	}
	return block.Value{Assets: []block.Asset{{Policy: chain.Hash28(p.Token.Currency), Name: p.Token.Name, Quantity: p.Amount.Uint64()}}}
}

func addValues(a, b block.Value) block.Value {
	out := block.Value{Lovelace: a.Lovelace + b.Lovelace, Assets: slices.Clone(a.Assets)}
	for _, x := range b.Assets {
		i := slices.IndexFunc(out.Assets, func(y block.Asset) bool { return y.Policy == x.Policy && string(y.Name) == string(x.Name) })
		if i < 0 {
			out.Assets = append(out.Assets, x)
		} else {
			out.Assets[i].Quantity += x.Quantity
		}
	}
	return out
}

// holdingOfAssets reads a payment's assets back.
func holdingOfAssets(t *testing.T, a record.Assets) holding {
	t.Helper()
	h := holding{"": new(big.Int).SetUint64(a.Lovelace)}
	for policy, names := range a.Tokens {
		p, err := hex.DecodeString(policy)
		if err != nil {
			t.Fatal(err)
		}
		for name, q := range names {
			n, err := marlowe.NameFromText(name)
			if err != nil {
				t.Fatal(err)
			}
			v, ok := new(big.Int).SetString(q.String(), 10)
			if !ok {
				t.Fatal(q)
			}
			h[assetKey(p, n)] = v
		}
	}
	return h
}
