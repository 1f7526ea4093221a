package classify_test

import (
	"encoding/hex"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// chainBuilder makes blocks of hand-written transactions.
type chainBuilder struct {
	t    *testing.T
	c    *classify.Classifier
	tip  chain.BlockHeader
	seed byte
}

func newChainBuilder(t *testing.T) *chainBuilder {
	return &chainBuilder{t: t, c: classify.New(classify.Options{})}
}

func (cb *chainBuilder) ref() chain.TxOutRef {
	cb.seed++
	var h chain.Hash32
	h[0], h[1] = 0xee, cb.seed
	return chain.TxOutRef{TxID: h, Index: 0}
}

// txID computes a transaction's id by building it alone.
func (cb *chainBuilder) txID(tx block.Tx) chain.Hash32 {
	_, b, err := block.BuildConwayBlock(block.HeaderSpec{Slot: 1, BlockNo: 1}, []block.Tx{tx})
	if err != nil {
		cb.t.Fatal(err)
	}
	return b.Txs[0].ID
}

// add builds a block of txs and classifies it.
func (cb *chainBuilder) add(txs ...block.Tx) *classify.RollForward {
	cb.t.Helper()
	raw, b, err := block.BuildConwayBlock(block.HeaderSpec{Slot: cb.tip.Slot + 20, BlockNo: cb.tip.BlockNo + 1, PrevHash: cb.tip.Hash}, txs)
	if err != nil {
		cb.t.Fatal(err)
	}
	cb.tip = b.Header
	ev, err := cb.c.RollForward(block.TypeConway, raw, chain.Tip{Point: b.Header.Point(), BlockNo: b.Header.BlockNo})
	if err != nil {
		cb.t.Fatal(err)
	}
	if len(ev.Failures) > 0 {
		cb.t.Fatalf("failures: %v", ev.Failures)
	}
	return ev
}

func scriptAddr(h chain.Hash28, header byte, stake []byte) []byte {
	a := append([]byte{header}, h[:]...)
	return append(a, stake...)
}

func role(name string) marlowe.Party { return marlowe.Party{Role: []byte(name)} }

var ada = marlowe.Token{Currency: []byte{}, Name: []byte{}}

// simpleDatum: When [Case (Deposit a a ada 10) (Pay a (Party b) ada 10 Close)] 100 Close.
func simpleDatum(rolesCurrency []byte) []byte {
	pay := &marlowe.Pay{From: role("a"), To: marlowe.Payee{Kind: marlowe.PayeeParty, Party: role("b")}, Token: ada, Value: &marlowe.Constant{N: big.NewInt(10)}, Then: &marlowe.Close{}}
	w := &marlowe.When{Timeout: big.NewInt(100), TimeoutContinuation: &marlowe.Close{}, Cases: []marlowe.Case{{
		Action: &marlowe.Deposit{IntoAccount: role("a"), From: role("a"), Token: ada, Amount: &marlowe.Constant{N: big.NewInt(10)}},
		Then:   pay,
	}}}
	md := marlowe.MarloweData{Params: marlowe.MarloweParams{RolesCurrency: rolesCurrency}, State: marlowe.State{MinTime: big.NewInt(0)}, Contract: w}
	return pd.Encode(md.ToData())
}

func depositRedeemer() []byte {
	in := marlowe.Input{Content: &marlowe.IDeposit{IntoAccount: role("a"), From: role("a"), Token: ada, Amount: big.NewInt(10)}}
	return pd.Encode(marlowe.Redeemer{in}.ToData())
}

func wallet() block.TxOut {
	return block.TxOut{Address: append([]byte{0x60}, make([]byte, 28)...), Value: block.Value{Lovelace: 2_000_000}}
}

// TestEveryScriptVersion runs a create, an apply with a payout, and a
// withdrawal on each of the five versions, with every kind of stake part:
// all ten script hashes are recognised.
func TestEveryScriptVersion(t *testing.T) {
	stakes := []struct {
		header byte
		stake  []byte
	}{
		{0x70, nil},                      // enterprise
		{0x10, make([]byte, 28)},         // stake key
		{0x30, make([]byte, 28)},         // stake script
		{0x50, []byte{0x81, 0x00, 0x01}}, // pointer
	}
	for i, v := range marlowe.ScriptVersions {
		cb := newChainBuilder(t)
		st := stakes[i%len(stakes)]
		addr := scriptAddr(v.Semantics, st.header, st.stake)
		currency := make([]byte, 28)
		currency[0] = byte(i + 1)

		create := block.Tx{Inputs: []chain.TxOutRef{cb.ref()}, Fee: 1, IsValid: true,
			Outputs: []block.TxOut{wallet(), {Address: addr, Value: block.Value{Lovelace: 2_000_000}, InlineDatum: simpleDatum(currency)}}}
		ev := cb.add(create)
		if len(ev.Txs) != 1 || len(ev.Txs[0].Creates) != 1 {
			t.Fatalf("%s: create not recognised: %+v", v.Name, ev.Txs)
		}
		cr := ev.Txs[0].Creates[0]
		if cr.Version != v.Name || cr.Ref.Index != 1 || cr.ContractID != cr.Ref {
			t.Fatalf("%s: create %+v", v.Name, cr)
		}

		// Apply: spend the contract with the wallet input sorted before it.
		payoutDatum := pd.Encode((&marlowe.PayoutDatum{RolesCurrency: currency, Role: []byte("b")}).ToData())
		pdHash := block.DatumHash(payoutDatum)
		walletIn := chain.TxOutRef{TxID: chain.Hash32{}, Index: 3}
		apply := block.Tx{Inputs: []chain.TxOutRef{cr.Ref, walletIn}, Fee: 1, IsValid: true,
			Redeemers: []block.Redeemer{{Tag: block.RedeemerSpend, Index: 1, Data: depositRedeemer()}},
			Outputs: []block.TxOut{
				{Address: scriptAddr(v.Payout, 0x70, nil), Value: block.Value{Lovelace: 10}, DatumHash: &pdHash},
				wallet(),
			},
			Datums: map[chain.Hash32][]byte{pdHash: payoutDatum},
		}
		ev = cb.add(apply)
		tx := ev.Txs[0]
		if len(tx.ContractInputs) != 1 || tx.ContractInputs[0].RedeemerError != "" || len(tx.ContractInputs[0].Inputs) != 1 {
			t.Fatalf("%s: apply input %+v", v.Name, tx.ContractInputs)
		}
		if len(tx.Continuations) != 0 || len(tx.Payouts) != 1 || string(tx.Payouts[0].Payout.Role) != "b" {
			t.Fatalf("%s: apply outputs %+v %+v", v.Name, tx.Continuations, tx.Payouts)
		}
		if len(ev.Changes.Removed) != 1 || len(ev.Changes.Added) != 1 || ev.Changes.Added[0].Kind != classify.KindPayout {
			t.Fatalf("%s: changes %+v", v.Name, ev.Changes)
		}

		withdraw := block.Tx{Inputs: []chain.TxOutRef{tx.Payouts[0].Ref}, Fee: 1, IsValid: true, Outputs: []block.TxOut{wallet()},
			Redeemers: []block.Redeemer{{Tag: block.RedeemerSpend, Index: 0, Data: pd.Encode(pd.NewConstr(0))}}}
		ev = cb.add(withdraw)
		if len(ev.Txs) != 1 || len(ev.Txs[0].PayoutInputs) != 1 || ev.Txs[0].PayoutInputs[0].UTxO.ContractID != cr.ContractID {
			t.Fatalf("%s: withdrawal %+v", v.Name, ev.Txs)
		}
		if cb.c.UTxOs().Len() != 0 {
			t.Fatalf("%s: %d outputs still tracked", v.Name, cb.c.UTxOs().Len())
		}
	}
}

func TestSameBlockCreateAndApplyAndUndo(t *testing.T) {
	cb := newChainBuilder(t)
	v := marlowe.ScriptVersions[4]
	addr := scriptAddr(v.Semantics, 0x70, nil)
	create := block.Tx{Inputs: []chain.TxOutRef{cb.ref()}, Fee: 1, IsValid: true,
		Outputs: []block.TxOut{{Address: addr, Value: block.Value{Lovelace: 2_000_000}, InlineDatum: simpleDatum(nil)}}}
	id := cb.txID(create)
	contract := chain.TxOutRef{TxID: id}
	// The apply continues the contract (same address) with a new datum.
	apply := block.Tx{Inputs: []chain.TxOutRef{contract}, Fee: 1, IsValid: true,
		Redeemers: []block.Redeemer{{Tag: block.RedeemerSpend, Index: 0, Data: depositRedeemer()}},
		Outputs:   []block.TxOut{{Address: addr, Value: block.Value{Lovelace: 3_000_000}, InlineDatum: simpleDatum(nil)}}}
	before := cb.add(block.Tx{Inputs: []chain.TxOutRef{cb.ref()}, Fee: 1, IsValid: true, Outputs: []block.TxOut{wallet()}})
	ev := cb.add(create, apply)
	if len(ev.Txs) != 2 || len(ev.Txs[1].Continuations) != 1 || ev.Txs[1].Continuations[0].ContractID != contract {
		t.Fatalf("same-block apply not followed: %+v", ev.Txs)
	}
	// Net changes: only the continuation is added; the created output was
	// spent in the same block.
	if len(ev.Changes.Added) != 1 || len(ev.Changes.Removed) != 0 || ev.Changes.Added[0].Ref.TxID == id {
		t.Fatalf("changes %+v", ev.Changes)
	}
	rb, err := cb.c.RollBackward(before.Header.Point(), chain.Tip{})
	if err != nil {
		t.Fatal(err)
	}
	if cb.c.UTxOs().Len() != 0 || len(rb.Undone) != 1 {
		t.Fatalf("after rollback: %d tracked, undone %+v", cb.c.UTxOs().Len(), rb.Undone)
	}
	// Redo puts it back.
	cb.c.Redo(rb)
	if cb.c.UTxOs().Len() != 1 {
		t.Fatal("redo did not restore the output")
	}
}

func TestInvalidAndOddTransactions(t *testing.T) {
	cb := newChainBuilder(t)
	v := marlowe.ScriptVersions[0]
	addr := scriptAddr(v.Semantics, 0x70, nil)
	ev := cb.add(
		block.Tx{Inputs: []chain.TxOutRef{cb.ref()}, Fee: 1, IsValid: true,
			Outputs: []block.TxOut{{Address: addr, Value: block.Value{Lovelace: 1}, InlineDatum: simpleDatum(nil)}}},
		block.Tx{Inputs: []chain.TxOutRef{cb.ref()}, Fee: 1, IsValid: true,
			Outputs: []block.TxOut{{Address: addr, Value: block.Value{Lovelace: 1}, InlineDatum: simpleDatum(nil)}}},
	)
	a, b := ev.Txs[0].Creates[0].Ref, ev.Txs[1].Creates[0].Ref

	// A phase-2-invalid apply changes nothing.
	invalid := block.Tx{Inputs: []chain.TxOutRef{a}, Collateral: []chain.TxOutRef{cb.ref()}, Fee: 1, IsValid: false,
		CollateralReturn: &block.TxOut{Address: wallet().Address, Value: block.Value{Lovelace: 5}},
		Redeemers:        []block.Redeemer{{Tag: block.RedeemerSpend, Index: 0, Data: depositRedeemer()}},
		Outputs:          []block.TxOut{{Address: addr, Value: block.Value{Lovelace: 1}, InlineDatum: simpleDatum(nil)}}}
	ev = cb.add(invalid)
	if len(ev.Txs) != 1 || ev.Txs[0].IsValid || !ev.Changes.Empty() || cb.c.UTxOs().Len() != 2 {
		t.Fatalf("invalid tx: %+v, changes %+v", ev.Txs, ev.Changes)
	}

	// An apply without a redeemer and a datum that does not decode: the
	// contract is still followed at its new output.
	odd := block.Tx{Inputs: []chain.TxOutRef{a}, Fee: 1, IsValid: true,
		Outputs: []block.TxOut{{Address: addr, Value: block.Value{Lovelace: 1}, InlineDatum: pd.Encode(pd.NewInt(7))}}}
	ev = cb.add(odd)
	tx := ev.Txs[0]
	if tx.ContractInputs[0].RedeemerError == "" || len(tx.Rejected) != 1 || tx.Rejected[0].ContractID != a {
		t.Fatalf("odd apply: %+v", tx)
	}
	next := chain.TxOutRef{TxID: tx.ID, Index: 0}
	if u, ok := cb.c.UTxOs().Get(next); !ok || u.ContractID != a {
		t.Fatal("the contract is no longer followed")
	}

	// Two contract inputs in one transaction are reported, not followed.
	double := block.Tx{Inputs: []chain.TxOutRef{next, b}, Fee: 1, IsValid: true, Outputs: []block.TxOut{wallet()}}
	ev = cb.add(double)
	if len(ev.Txs[0].Rejected) != 2 || !strings.Contains(ev.Txs[0].Rejected[0].Reason, "spends 2 contract outputs") {
		t.Fatalf("double spend: %+v", ev.Txs[0].Rejected)
	}

	// A create whose datum hash is not in the witness set.
	var missing chain.Hash32
	missing[3] = 9
	ev = cb.add(block.Tx{Inputs: []chain.TxOutRef{cb.ref()}, Fee: 1, IsValid: true,
		Outputs: []block.TxOut{{Address: addr, Value: block.Value{Lovelace: 1}, DatumHash: &missing}}})
	if len(ev.Txs) != 1 || len(ev.Txs[0].Rejected) != 1 || !strings.Contains(ev.Txs[0].Rejected[0].Reason, "not in the transaction's witness set") {
		t.Fatalf("missing datum: %+v", ev.Txs)
	}
}

func TestRollbackTooDeep(t *testing.T) {
	cb := newChainBuilder(t)
	cb.c = classify.New(classify.Options{RollbackDepth: 5})
	v := marlowe.ScriptVersions[1]
	addr := scriptAddr(v.Semantics, 0x70, nil)
	first := cb.add(block.Tx{Inputs: []chain.TxOutRef{cb.ref()}, Fee: 1, IsValid: true,
		Outputs: []block.TxOut{{Address: addr, Value: block.Value{Lovelace: 1}, InlineDatum: simpleDatum(nil)}}})
	for range 10 {
		cb.add(block.Tx{Inputs: []chain.TxOutRef{cb.ref()}, Fee: 1, IsValid: true, Outputs: []block.TxOut{wallet()}})
	}
	_, err := cb.c.RollBackward(chain.Origin, chain.Tip{})
	if !errors.Is(err, classify.ErrRollbackTooDeep) {
		t.Fatalf("rollback past the horizon: %v", err)
	}
	// To the block that made the change is fine.
	if _, err := cb.c.RollBackward(first.Header.Point(), chain.Tip{}); err != nil {
		t.Fatal(err)
	}
}

// TestMainnetBlocks: one real block per era classifies as nothing relevant,
// with or without the prefilter, and without failures.
func TestMainnetBlocks(t *testing.T) {
	types := map[string]block.Type{"byron": block.TypeByron, "shelley": block.TypeShelley, "allegra": block.TypeAllegra,
		"mary": block.TypeMary, "alonzo": block.TypeAlonzo, "babbage": block.TypeBabbage, "conway": block.TypeConway}
	for name, typ := range types {
		raw := readBlock(t, name)
		for _, all := range []bool{false, true} {
			c := classify.New(classify.Options{DecodeAll: all})
			ev, err := c.RollForward(typ, raw, chain.Tip{})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(ev.Txs) != 0 || len(ev.Failures) != 0 || !ev.Changes.Empty() {
				t.Fatalf("%s: %+v", name, ev)
			}
			if all && typ.HasPlutus() && !ev.Decoded {
				t.Fatalf("%s: not decoded", name)
			}
			if ev.Header.Slot == 0 || ev.Header.Hash.IsZero() {
				t.Fatalf("%s: header %+v", name, ev.Header)
			}
		}
	}
}

func readBlock(t testing.TB, era string) []byte {
	text, err := os.ReadFile(filepath.Join("..", "..", "testdata", "mainnet-blocks", era+"_block.hex"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(text)))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// FuzzClassify feeds mutated blocks to a classifier that tracks outputs of
// the block's own transactions: no panic, ever. The seeds are small blocks
// with Marlowe transactions (the fuzzer slows to a crawl on inputs of tens of
// kilobytes; whole mainnet blocks are checked by TestMainnetBlocks).
func FuzzClassify(f *testing.F) {
	for _, v := range marlowe.ScriptVersions[:2] {
		addr := scriptAddr(v.Semantics, 0x10, make([]byte, 28))
		tx := block.Tx{Inputs: []chain.TxOutRef{{Index: 1}}, Fee: 1, IsValid: true,
			Redeemers: []block.Redeemer{{Tag: block.RedeemerSpend, Index: 0, Data: depositRedeemer()}},
			Outputs:   []block.TxOut{{Address: addr, Value: block.Value{Lovelace: 2_000_000}, InlineDatum: simpleDatum(make([]byte, 28))}}}
		seed, _, err := block.BuildConwayBlock(block.HeaderSpec{Slot: 5, BlockNo: 2}, []block.Tx{tx})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seed)
	}
	// One classifier for every input: the state it accumulates from earlier
	// inputs only makes the fuzzing meaner.
	c := classify.New(classify.Options{DecodeAll: true})
	f.Fuzz(func(t *testing.T, raw []byte) {
		// Track the outputs of every transaction the block may hold, and the
		// outputs its inputs spend, so that spends are looked up too.
		if b, err := block.DecodeBlock(block.TypeConway, raw, block.Options{}); err == nil {
			var set []classify.TrackedUTxO
			for _, tx := range b.Txs {
				set = append(set, classify.TrackedUTxO{Ref: chain.TxOutRef{TxID: tx.ID}, Kind: classify.KindContract, Version: "v5"})
				for _, in := range tx.Inputs {
					set = append(set, classify.TrackedUTxO{Ref: in, Kind: classify.KindPayout, Version: "v1"})
				}
			}
			slices.SortFunc(set, func(a, b classify.TrackedUTxO) int { return a.Ref.Compare(b.Ref) })
			c.UTxOs().Restore(set, nil, chain.BlockHeader{})
		}
		for _, typ := range []block.Type{block.TypeAlonzo, block.TypeBabbage, block.TypeConway} {
			_, _ = c.RollForward(typ, raw, chain.Tip{})
		}
	})
}

// TestEventsDoNotAliasBlockBytes checks that nothing in an event points into
// the raw block: events and the UTxO set outlive the block (the history
// store caches contract headers for the process's lifetime), and a slice into
// the block would keep all of it in memory. The block's bytes are scribbled
// over after classification and the event must not change.
func TestEventsDoNotAliasBlockBytes(t *testing.T) {
	cb := newChainBuilder(t)
	v := marlowe.ScriptVersions[4]
	addr := scriptAddr(v.Semantics, 0x70, nil)
	currency := make([]byte, 28)
	for i := range currency {
		currency[i] = byte(0x40 + i)
	}
	classifyScribbled := func(txs ...block.Tx) *classify.RollForward {
		t.Helper()
		raw, b, err := block.BuildConwayBlock(block.HeaderSpec{Slot: cb.tip.Slot + 20, BlockNo: cb.tip.BlockNo + 1, PrevHash: cb.tip.Hash}, txs)
		if err != nil {
			t.Fatal(err)
		}
		cb.tip = b.Header
		ev, err := cb.c.RollForward(block.TypeConway, raw, chain.Tip{Point: b.Header.Point(), BlockNo: b.Header.BlockNo})
		if err != nil || len(ev.Failures) > 0 {
			t.Fatalf("classify: %v %v", err, ev.Failures)
		}
		for i := range raw {
			raw[i] = 0xaa
		}
		return ev
	}

	datum := simpleDatum(currency)
	create := block.Tx{Inputs: []chain.TxOutRef{cb.ref()}, Fee: 1, IsValid: true,
		Outputs: []block.TxOut{{Address: addr, Value: block.Value{Lovelace: 2_000_000}, InlineDatum: datum}}}
	ev := classifyScribbled(create)
	cr := ev.Txs[0].Creates[0]
	if !slices.Equal(cr.Datum, datum) || !slices.Equal(pd.Encode(cr.Data.ToData()), datum) {
		t.Fatal("the created contract's datum changed with the block's bytes")
	}
	if !slices.Equal(cr.Data.Params.RolesCurrency, currency) || !slices.Equal(cr.Address, addr) {
		t.Fatalf("roles currency or address changed with the block's bytes: %x %x", cr.Data.Params.RolesCurrency, cr.Address)
	}

	payoutDatum := pd.Encode((&marlowe.PayoutDatum{RolesCurrency: currency, Role: []byte("b")}).ToData())
	pdHash := block.DatumHash(payoutDatum)
	redeemer := depositRedeemer()
	apply := block.Tx{Inputs: []chain.TxOutRef{cr.Ref}, Fee: 1, IsValid: true,
		Redeemers: []block.Redeemer{{Tag: block.RedeemerSpend, Index: 0, Data: redeemer}},
		Outputs:   []block.TxOut{{Address: scriptAddr(v.Payout, 0x70, nil), Value: block.Value{Lovelace: 10}, DatumHash: &pdHash}},
		Datums:    map[chain.Hash32][]byte{pdHash: payoutDatum},
	}
	ev = classifyScribbled(apply)
	tx := ev.Txs[0]
	if len(tx.Payouts) != 1 || len(tx.ContractInputs) != 1 {
		t.Fatalf("apply not recognised: %+v", tx)
	}
	p := tx.Payouts[0]
	if string(p.Payout.Role) != "b" || !slices.Equal(p.Payout.RolesCurrency, currency) || !slices.Equal(p.Datum, payoutDatum) {
		t.Fatalf("payout changed with the block's bytes: %x %q", p.Payout.RolesCurrency, p.Payout.Role)
	}
	if !slices.Equal(tx.ContractInputs[0].Redeemer, redeemer) || !slices.Equal(tx.Datums[pdHash], payoutDatum) {
		t.Fatal("redeemer or witness datum changed with the block's bytes")
	}
	in := tx.ContractInputs[0].Inputs[0].Content.(*marlowe.IDeposit)
	if string(in.From.Role) != "a" {
		t.Fatalf("decoded input changed with the block's bytes: %q", in.From.Role)
	}
	tracked, ok := cb.c.UTxOs().Get(p.Ref)
	if !ok || !slices.Equal(tracked.RolesCurrency, currency) || string(tracked.Role) != "b" {
		t.Fatalf("tracked payout changed with the block's bytes: %+v", tracked)
	}
}
