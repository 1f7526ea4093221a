package block

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"testing"

	"github.com/blinklabs-io/gouroboros/ledger"
	lcommon "github.com/blinklabs-io/gouroboros/ledger/common"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// Facts about the mainnet blocks, checked independently of gouroboros.
var mainnetFacts = map[string]struct {
	slot, blockNo uint64
	txs           int
}{
	"byron":   {4471207, 4468973, 0},
	"shelley": {16156972, 5065327, 0},
	"allegra": {23068573, 5406740, 0},
	"mary":    {39916670, 6236051, 0},
	"alonzo":  {72316767, 7791695, 4},
	"babbage": {76204984, 7981223, 14},
	"conway":  {159835207, 12069665, 8},
}

// decoded returns the block as gouroboros reads it and as DecodeBlock does.
func (mb mainnetBlock) decoded(t *testing.T) (ledger.Block, *Block) {
	t.Helper()
	g, err := ledger.NewBlockFromCbor(uint(mb.typ), mb.raw)
	if err != nil {
		t.Fatalf("gouroboros: %v", err)
	}
	b, err := DecodeBlock(mb.typ, mb.raw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g, b
}

func TestMainnetHeaders(t *testing.T) {
	for _, mb := range mainnetBlocks(t) {
		t.Run(mb.name, func(t *testing.T) {
			want, full := mb.decoded(t)
			got, err := DecodeHeader(mb.typ, mb.raw, Options{})
			if err != nil {
				t.Fatal(err)
			}
			facts := mainnetFacts[mb.name]
			for _, b := range []Block{got, *full} {
				if b.Type != mb.typ {
					t.Errorf("type %v, want %v", b.Type, mb.typ)
				}
				if b.Header.Hash != chain.Hash32(want.Hash()) {
					t.Errorf("hash %s, gouroboros %s", b.Header.Hash, want.Hash())
				}
				if b.Header.Slot != want.SlotNumber() || b.Header.Slot != facts.slot {
					t.Errorf("slot %d, gouroboros %d, want %d", b.Header.Slot, want.SlotNumber(), facts.slot)
				}
				if b.Header.BlockNo != want.BlockNumber() || b.Header.BlockNo != facts.blockNo {
					t.Errorf("block number %d, gouroboros %d, want %d", b.Header.BlockNo, want.BlockNumber(), facts.blockNo)
				}
				if b.PrevHash != chain.Hash32(want.PrevHash()) {
					t.Errorf("prev hash %s, gouroboros %s", b.PrevHash, want.PrevHash())
				}
			}
			if len(got.Txs) != 0 {
				t.Errorf("DecodeHeader returned %d transactions", len(got.Txs))
			}
			if len(full.Txs) != facts.txs {
				t.Errorf("DecodeBlock returned %d transactions, want %d", len(full.Txs), facts.txs)
			}
		})
	}
}

func TestMainnetTransactions(t *testing.T) {
	for _, mb := range mainnetBlocks(t) {
		if !mb.typ.HasPlutus() {
			continue
		}
		t.Run(mb.name, func(t *testing.T) {
			gb, b := mb.decoded(t)
			gtxs := gb.Transactions()
			if len(b.Txs) != len(gtxs) {
				t.Fatalf("%d transactions, gouroboros %d", len(b.Txs), len(gtxs))
			}
			for i := range b.Txs {
				t.Run(fmt.Sprint(i), func(t *testing.T) {
					compareTx(t, &b.Txs[i], gtxs[i])
				})
			}
			// The copy detaches every byte slice and still compares equal.
			c, err := DecodeBlock(mb.typ, mb.raw, Options{Copy: true})
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.Txs {
				compareTx(t, &c.Txs[i], gtxs[i])
				cl := b.Txs[i].Clone()
				compareTx(t, &cl, gtxs[i])
			}
		})
	}
}

// compareTx checks one decoded transaction field by field against
// gouroboros.
func compareTx(t *testing.T, tx *Tx, g lcommon.Transaction) {
	t.Helper()
	if tx.ID != chain.Hash32(g.Hash()) {
		t.Errorf("id %s, gouroboros %s", tx.ID, g.Hash())
	}
	compareRefs(t, "inputs", tx.Inputs, g.Inputs())
	compareRefs(t, "collateral", tx.Collateral, g.Collateral())
	compareRefs(t, "reference inputs", tx.ReferenceInputs, g.ReferenceInputs())
	gouts := g.Outputs()
	if len(tx.Outputs) != len(gouts) {
		t.Fatalf("%d outputs, gouroboros %d", len(tx.Outputs), len(gouts))
	}
	for i := range tx.Outputs {
		compareOut(t, fmt.Sprintf("output %d", i), &tx.Outputs[i], gouts[i])
	}
	if gcr := g.CollateralReturn(); (tx.CollateralReturn == nil) != (gcr == nil) {
		t.Errorf("collateral return %v, gouroboros %v", tx.CollateralReturn, gcr)
	} else if gcr != nil {
		compareOut(t, "collateral return", tx.CollateralReturn, gcr)
	}
	if g.Fee().Cmp(new(big.Int).SetUint64(tx.Fee)) != 0 {
		t.Errorf("fee %d, gouroboros %s", tx.Fee, g.Fee())
	}
	compareOpt(t, "ttl", tx.TTL, g.TTL())
	compareOpt(t, "validity start", tx.ValidityStart, g.ValidityIntervalStart())
	compareMint(t, tx.Mint, g.AssetMint())

	gdatums := g.Witnesses().PlutusData()
	if len(tx.Datums) != len(gdatums) {
		t.Errorf("%d witness datums, gouroboros %d", len(tx.Datums), len(gdatums))
	}
	for _, d := range gdatums {
		h := chain.Hash32(d.Hash())
		if h != DatumHash(d.Cbor()) {
			t.Errorf("gouroboros datum hash %s is not the hash of its bytes", h)
		}
		if got, ok := tx.Datums[h]; !ok || !bytes.Equal(got, d.Cbor()) {
			t.Errorf("datum %s: %x, gouroboros %x", h, got, d.Cbor())
		}
	}

	type rkey struct {
		tag   RedeemerTag
		index uint32
	}
	greds := map[rkey]lcommon.RedeemerValue{}
	if rs := g.Witnesses().Redeemers(); rs != nil {
		for k, v := range rs.Iter() {
			greds[rkey{RedeemerTag(k.Tag), k.Index}] = v
		}
	}
	if len(tx.Redeemers) != len(greds) {
		t.Errorf("%d redeemers, gouroboros %d", len(tx.Redeemers), len(greds))
	}
	for _, rd := range tx.Redeemers {
		v, ok := greds[rkey{rd.Tag, rd.Index}]
		switch {
		case !ok:
			t.Errorf("redeemer %d/%d not in gouroboros", rd.Tag, rd.Index)
		case !bytes.Equal(rd.Data, v.Data.Cbor()):
			t.Errorf("redeemer %d/%d data %x, gouroboros %x", rd.Tag, rd.Index, rd.Data, v.Data.Cbor())
		case int64(rd.Mem) != v.ExUnits.Memory || int64(rd.Steps) != v.ExUnits.Steps:
			t.Errorf("redeemer %d/%d units %d/%d, gouroboros %d/%d", rd.Tag, rd.Index, rd.Mem, rd.Steps, v.ExUnits.Memory, v.ExUnits.Steps)
		}
	}

	gmeta := map[uint64][]byte{}
	if mm, ok := g.Metadata().(lcommon.MetaMap); ok {
		for _, p := range mm.Pairs {
			k, ok := p.Key.(lcommon.MetaInt)
			if !ok {
				t.Fatalf("gouroboros metadata key %T", p.Key)
			}
			gmeta[k.Value.Uint64()] = p.Value.Cbor()
		}
	}
	if len(tx.Metadata) != len(gmeta) {
		t.Errorf("%d metadata labels, gouroboros %d", len(tx.Metadata), len(gmeta))
	}
	for _, m := range tx.Metadata {
		if !bytes.Equal(m.Value, gmeta[m.Label]) {
			t.Errorf("metadata %d: %x, gouroboros %x", m.Label, m.Value, gmeta[m.Label])
		}
	}
	if tx.IsValid != g.IsValid() {
		t.Errorf("valid %v, gouroboros %v", tx.IsValid, g.IsValid())
	}
}

func compareRefs(t *testing.T, what string, got []chain.TxOutRef, want []lcommon.TransactionInput) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d, gouroboros %d", what, len(got), len(want))
		return
	}
	for i := range got {
		if got[i].TxID != chain.Hash32(want[i].Id()) || got[i].Index != want[i].Index() {
			t.Errorf("%s[%d]: %s, gouroboros %s", what, i, got[i], want[i])
		}
	}
}

func compareOpt(t *testing.T, what string, got *uint64, want uint64) {
	t.Helper()
	// gouroboros reports an absent field as 0.
	if (got == nil && want != 0) || (got != nil && *got != want) {
		t.Errorf("%s: %v, gouroboros %d", what, got, want)
	}
}

func compareOut(t *testing.T, what string, o *TxOut, g lcommon.TransactionOutput) {
	t.Helper()
	// gouroboros re-serialises addresses, so look for ours in the raw output.
	if !bytes.Contains(g.Cbor(), cborBytes(o.Address)) {
		t.Errorf("%s: address %x not in the raw output %x", what, o.Address, g.Cbor())
	}
	// Byron addresses (header type 8) are CBOR with attributes, which a
	// re-serialisation need not reproduce; the rest must match exactly.
	if ga := g.Address(); o.Address[0]>>4 != 8 {
		if gb, err := ga.Bytes(); err != nil || !bytes.Equal(gb, o.Address) {
			t.Errorf("%s: address %x, gouroboros %x (%v)", what, o.Address, gb, err)
		}
	}
	if g.Amount().Cmp(new(big.Int).SetUint64(o.Value.Lovelace)) != 0 {
		t.Errorf("%s: lovelace %d, gouroboros %s", what, o.Value.Lovelace, g.Amount())
	}
	ga := g.Assets()
	n := 0
	if ga != nil {
		for _, p := range ga.Policies() {
			n += len(ga.Assets(p))
		}
	}
	if n != len(o.Value.Assets) {
		t.Errorf("%s: %d assets, gouroboros %d", what, len(o.Value.Assets), n)
	}
	for _, a := range o.Value.Assets {
		if q := ga.Asset(lcommon.Blake2b224(a.Policy), a.Name); q == nil || q.Cmp(new(big.Int).SetUint64(a.Quantity)) != 0 {
			t.Errorf("%s: asset %s.%x %d, gouroboros %v", what, a.Policy, a.Name, a.Quantity, q)
		}
	}
	gd, gh := g.Datum(), g.DatumHash()
	switch {
	case o.InlineDatum != nil:
		// gouroboros reports the hash of an inline datum too.
		if gd == nil || !bytes.Equal(gd.Cbor(), o.InlineDatum) {
			t.Errorf("%s: inline datum %x, gouroboros %v", what, o.InlineDatum, gd)
		}
		if gh == nil || chain.Hash32(*gh) != DatumHash(o.InlineDatum) {
			t.Errorf("%s: gouroboros datum hash %v for inline datum", what, gh)
		}
		if o.DatumHash != nil {
			t.Errorf("%s: both inline datum and datum hash", what)
		}
	case o.DatumHash != nil:
		if gd != nil || gh == nil || chain.Hash32(*gh) != *o.DatumHash {
			t.Errorf("%s: datum hash %s, gouroboros %v / %v", what, o.DatumHash, gh, gd)
		}
	default:
		if gd != nil || gh != nil {
			t.Errorf("%s: no datum, gouroboros %v / %v", what, gh, gd)
		}
	}
	if o.HasScriptRef != (g.ScriptRef() != nil) {
		t.Errorf("%s: script ref %v, gouroboros %v", what, o.HasScriptRef, g.ScriptRef())
	}
}

func compareMint(t *testing.T, got []MintAsset, g *lcommon.MultiAsset[lcommon.MultiAssetTypeMint]) {
	t.Helper()
	n := 0
	if g != nil {
		for _, p := range g.Policies() {
			n += len(g.Assets(p))
		}
	}
	if n != len(got) {
		t.Errorf("%d minted assets, gouroboros %d", len(got), n)
	}
	for _, a := range got {
		if q := g.Asset(lcommon.Blake2b224(a.Policy), a.Name); q == nil || q.Cmp(big.NewInt(a.Quantity)) != 0 {
			t.Errorf("mint %s.%x %d, gouroboros %v", a.Policy, a.Name, a.Quantity, q)
		}
	}
}

// TestMainnetDetails pins facts about the real blocks that the classifier
// relies on and that gouroboros does not show directly.
func TestMainnetDetails(t *testing.T) {
	conway, err := DecodeBlock(TypeConway, mainnet(t, "conway"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Tx 4 has a tag-258 reference input set whose wire order is not sorted.
	refs := conway.Txs[4].ReferenceInputs
	if slices.IsSortedFunc(refs, chain.TxOutRef.Compare) {
		t.Errorf("conway tx 4 reference inputs are sorted: %v", refs)
	}
	// Conway tx 4 spends with redeemers in the legacy array form; its
	// collateral return is present and its inline datums keep their bytes.
	tx := &conway.Txs[4]
	if tx.CollateralReturn == nil || len(tx.Redeemers) != 3 || tx.Outputs[1].InlineDatum == nil {
		t.Errorf("conway tx 4: collateral return %v, %d redeemers, inline datum %x",
			tx.CollateralReturn, len(tx.Redeemers), tx.Outputs[1].InlineDatum)
	}
	if got := hex.EncodeToString(tx.Outputs[1].Address[:1]); got != "11" {
		t.Errorf("conway tx 4 output 1 address header %s, want 11 (script payment, key stake)", got)
	}
	for _, rd := range tx.Redeemers {
		if rd.Tag != RedeemerSpend {
			continue
		}
		in, ok := tx.RedeemedInput(rd)
		if !ok || in != tx.SortedInputs()[rd.Index] {
			t.Errorf("redeemer %d: input %v %v", rd.Index, in, ok)
		}
	}
	// Metadata label 674 on txs 4, 5 and 6.
	for i, tx := range conway.Txs {
		want := i >= 4 && i <= 6
		if got := len(tx.Metadata) == 1 && tx.Metadata[0].Label == 674; got != want {
			t.Errorf("tx %d metadata %v", i, tx.Metadata)
		}
	}
	babbage, err := DecodeBlock(TypeBabbage, mainnet(t, "babbage"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	unsorted := 0
	for _, tx := range babbage.Txs {
		if !slices.IsSortedFunc(tx.Inputs, chain.TxOutRef.Compare) {
			unsorted++
		}
	}
	if unsorted == 0 {
		t.Error("no babbage tx has unsorted inputs")
	}
}
