package block

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/blinklabs-io/gouroboros/ledger"
	"github.com/blinklabs-io/gouroboros/ledger/conway"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// gen makes random but valid transaction specs from a seeded generator.
type gen struct{ rng *rand.Rand }

func newGen(seed uint64) *gen { return &gen{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

func (g *gen) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.rng.UintN(256))
	}
	return b
}

func (g *gen) hash32() (h chain.Hash32) { copy(h[:], g.bytes(32)); return h }
func (g *gen) hash28() (h chain.Hash28) { copy(h[:], g.bytes(28)); return h }

// address returns a valid Shelley address: base, enterprise or script
// addresses on either network.
func (g *gen) address() []byte {
	headers := []byte{0x00, 0x01, 0x10, 0x11, 0x20, 0x30, 0x60, 0x61, 0x70, 0x71}
	h := headers[g.rng.IntN(len(headers))]
	n := 28
	if h>>4 < 4 {
		n = 56
	}
	return append([]byte{h}, g.bytes(n)...)
}

// plutusData returns random Plutus Data in the encoding the Plutus
// serialiser uses: constructors as tags with indefinite-length field lists.
func (g *gen) plutusData(depth int) []byte { return encoded(g.writeData, depth) }

// encoded returns what write writes at depth.
func encoded(write func(*encoder, int), depth int) []byte {
	var e encoder
	write(&e, depth)
	return e.buf
}

func (g *gen) writeData(e *encoder, depth int) {
	k := g.rng.IntN(5)
	if depth <= 0 {
		k = 3 + g.rng.IntN(2)
	}
	switch k {
	case 0:
		e.tag(121 + uint64(g.rng.IntN(7)))
		n := g.rng.IntN(4)
		if n == 0 {
			e.array(0)
			return
		}
		e.raw([]byte{0x9f})
		for range n {
			g.writeData(e, depth-1)
		}
		e.raw([]byte{breakByte})
	case 1:
		n := g.rng.IntN(4)
		e.array(n)
		for range n {
			g.writeData(e, depth-1)
		}
	case 2:
		n := g.rng.IntN(3)
		e.mapHead(n)
		for i := range n {
			e.int(int64(i)) // distinct keys
			g.writeData(e, depth-1)
		}
	case 3:
		e.int(g.rng.Int64() >> g.rng.IntN(64) * int64(1-2*g.rng.IntN(2)))
	default:
		e.bytes(g.bytes(g.rng.IntN(65)))
	}
}

// metadatum returns a random transaction metadatum.
func (g *gen) metadatum(depth int) []byte { return encoded(g.writeMeta, depth) }

func (g *gen) writeMeta(e *encoder, depth int) {
	k := g.rng.IntN(5)
	if depth <= 0 {
		k = g.rng.IntN(3)
	}
	switch k {
	case 0:
		e.int(g.rng.Int64() >> g.rng.IntN(64))
	case 1:
		e.bytes(g.bytes(g.rng.IntN(65)))
	case 2:
		s := make([]byte, g.rng.IntN(65))
		for i := range s {
			s[i] = 'a' + byte(g.rng.IntN(26))
		}
		e.head(majorText, uint64(len(s)))
		e.raw(s)
	case 3:
		n := g.rng.IntN(4)
		e.array(n)
		for range n {
			g.writeMeta(e, depth-1)
		}
	default:
		n := g.rng.IntN(3)
		e.mapHead(n)
		for i := range n {
			e.uint(uint64(i))
			g.writeMeta(e, depth-1)
		}
	}
}

func (g *gen) refs(n int) []chain.TxOutRef {
	out := make([]chain.TxOutRef, n)
	for i := range out {
		out[i] = chain.TxOutRef{TxID: g.hash32(), Index: uint32(g.rng.IntN(40))}
	}
	return out
}

func (g *gen) output() TxOut {
	o := TxOut{Address: g.address(), Value: Value{Lovelace: g.rng.Uint64N(1 << 50)}}
	for range g.rng.IntN(3) {
		p := g.hash28()
		for i := range 1 + g.rng.IntN(3) {
			name := g.bytes(g.rng.IntN(33))
			if i > 0 {
				name = append(name[:0:0], append([]byte{byte(i)}, name...)[:min(len(name)+1, 32)]...)
			}
			o.Value.Assets = append(o.Value.Assets, Asset{Policy: p, Name: name, Quantity: 1 + g.rng.Uint64N(math.MaxInt64)})
		}
	}
	switch g.rng.IntN(4) {
	case 0:
		h := g.hash32()
		o.DatumHash = &h
	case 1:
		o.InlineDatum = g.plutusData(3)
	}
	o.HasScriptRef = g.rng.IntN(5) == 0
	return o
}

// tx returns a random transaction spec.
func (g *gen) tx() Tx {
	tx := Tx{
		Inputs:  g.refs(1 + g.rng.IntN(5)),
		Fee:     g.rng.Uint64N(2_000_000),
		IsValid: g.rng.IntN(4) != 0,
	}
	for range 1 + g.rng.IntN(4) {
		tx.Outputs = append(tx.Outputs, g.output())
	}
	if g.rng.IntN(2) == 0 {
		v := g.rng.Uint64N(1 << 40)
		tx.TTL = &v
	}
	if g.rng.IntN(2) == 0 {
		v := g.rng.Uint64N(1 << 40)
		tx.ValidityStart = &v
	}
	if !tx.IsValid || g.rng.IntN(2) == 0 {
		tx.Collateral = g.refs(1 + g.rng.IntN(2))
		if g.rng.IntN(3) != 0 {
			o := g.output()
			tx.CollateralReturn = &o
		}
	}
	if g.rng.IntN(3) == 0 {
		tx.ReferenceInputs = g.refs(1 + g.rng.IntN(3))
	}
	if g.rng.IntN(3) == 0 {
		p := g.hash28()
		for i := range 1 + g.rng.IntN(3) {
			q := 1 + g.rng.Int64N(math.MaxInt64-1)
			if g.rng.IntN(2) == 0 {
				q = -q
			}
			tx.Mint = append(tx.Mint, MintAsset{Policy: p, Name: []byte{'m', byte(i)}, Quantity: q})
		}
	}
	if n := g.rng.IntN(3); n > 0 {
		tx.Datums = map[chain.Hash32][]byte{}
		for range n {
			d := g.plutusData(4)
			tx.Datums[DatumHash(d)] = d
		}
	}
	used := map[[2]uint64]bool{}
	for range g.rng.IntN(4) {
		tag, ix := RedeemerTag(g.rng.IntN(6)), uint32(g.rng.IntN(len(tx.Inputs)))
		if used[[2]uint64{uint64(tag), uint64(ix)}] {
			continue
		}
		used[[2]uint64{uint64(tag), uint64(ix)}] = true
		tx.Redeemers = append(tx.Redeemers, Redeemer{Tag: tag, Index: ix, Data: g.plutusData(3),
			Mem: g.rng.Uint64N(1 << 24), Steps: g.rng.Uint64N(1 << 34)})
	}
	labels := map[uint64]bool{}
	for range g.rng.IntN(3) {
		l := []uint64{674, 1564, g.rng.Uint64()}[g.rng.IntN(3)]
		if !labels[l] {
			labels[l] = true
			tx.Metadata = append(tx.Metadata, Metadatum{Label: l, Value: g.metadatum(3)})
		}
	}
	return tx
}

// checkBuilt checks a built block against its specs, against DecodeHeader
// and against gouroboros with body hash validation.
func checkBuilt(t *testing.T, h HeaderSpec, specs []Tx, raw []byte, b *Block) {
	t.Helper()
	gb, err := ledger.NewBlockFromCbor(uint(TypeConway), raw)
	if err != nil {
		t.Fatalf("gouroboros rejects the built block: %v", err)
	}
	hb, err := DecodeHeader(TypeConway, raw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if hb.Header != b.Header || hb.PrevHash != b.PrevHash {
		t.Errorf("DecodeHeader %+v, DecodeBlock %+v", hb, b)
	}
	if b.Header.Hash != chain.Hash32(gb.Hash()) || b.Header.Slot != h.Slot || b.Header.BlockNo != h.BlockNo ||
		b.PrevHash != h.PrevHash || gb.SlotNumber() != h.Slot || gb.BlockNumber() != h.BlockNo ||
		chain.Hash32(gb.PrevHash()) != h.PrevHash {
		t.Errorf("header %+v prev %s; spec %+v; gouroboros %s %d %d %s", b.Header, b.PrevHash, h,
			gb.Hash(), gb.SlotNumber(), gb.BlockNumber(), gb.PrevHash())
	}
	var size BodySize
	for i := range specs {
		if size, err = size.Plus(&specs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if uint64(size.Total()) != gb.BlockBodySize() {
		t.Errorf("BodySize %d, header says %d", size.Total(), gb.BlockBodySize())
	}
	gtxs := gb.Transactions()
	if len(b.Txs) != len(specs) || len(gtxs) != len(specs) {
		t.Fatalf("%d specs, %d built, gouroboros %d", len(specs), len(b.Txs), len(gtxs))
	}
	for i := range specs {
		got := b.Txs[i]
		if got.Index != i {
			t.Errorf("tx %d has index %d", i, got.Index)
		}
		compareTx(t, &got, gtxs[i])
		n, err := TxBodySize(&specs[i])
		if err != nil {
			t.Fatal(err)
		}
		if body := gtxs[i].(*conway.ConwayTransaction).Body.Cbor(); n != len(body) {
			t.Errorf("tx %d: TxBodySize %d, body has %d bytes", i, n, len(body))
		}
		if id, err := TxID(&specs[i]); err != nil || id != got.ID {
			t.Errorf("tx %d: TxID %s %v, built %s", i, id, err, got.ID)
		}
		want := canonicalTx(specs[i])
		got = canonicalTx(got)
		want.ID, want.Index = got.ID, got.Index
		if !reflect.DeepEqual(got, want) {
			t.Errorf("tx %d round trip:\n got %+v\nwant %+v", i, got, want)
		}
	}
}

func TestBuildRandomBlocks(t *testing.T) {
	g := newGen(1)
	prev := chain.Hash32{}
	for n := range 200 {
		specs := make([]Tx, g.rng.IntN(8))
		for i := range specs {
			specs[i] = g.tx()
		}
		h := HeaderSpec{Slot: uint64(1000 + 20*n), BlockNo: uint64(n), PrevHash: prev}
		raw, b, err := BuildConwayBlock(h, specs)
		if err != nil {
			t.Fatalf("block %d: %v", n, err)
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) { checkBuilt(t, h, specs, raw, b) })
		prev = b.Header.Hash
	}
}

func TestBuildFullBlock(t *testing.T) {
	g := newGen(2)
	specs, size := fullBlock(t, func() Tx {
		tx := g.tx()
		// Filler: a metadata label with random bytes, in 64-byte chunks.
		var e encoder
		e.array(40)
		for range 40 {
			e.bytes(g.bytes(64))
		}
		tx.Metadata = append(tx.Metadata[:0], Metadatum{Label: 9999, Value: e.buf})
		return tx
	})
	for i := range specs {
		if n, _ := TxSize(&specs[i]); n > MaxTxSize {
			t.Fatalf("tx of %d bytes", n)
		}
	}
	if size.Total() < MaxBlockBodySize-5000 || size.Txs() != len(specs) {
		t.Fatalf("filled %d of %d bytes with %d txs", size.Total(), MaxBlockBodySize, size.Txs())
	}
	h := HeaderSpec{Slot: 99, BlockNo: 7, PrevHash: g.hash32()}
	raw, b, err := BuildConwayBlock(h, specs)
	if err != nil {
		t.Fatal(err)
	}
	checkBuilt(t, h, specs, raw, b)
	t.Logf("%d txs, body %d bytes, block %d bytes", len(specs), size.Total(), len(raw))
}

func TestBuildInvalidTxWithCollateralReturn(t *testing.T) {
	ret := TxOut{Address: append([]byte{0x61}, make([]byte, 28)...), Value: Value{Lovelace: 5_000_000}}
	datum := []byte{0xd8, 0x79, 0x80} // Constr 0 []
	spec := Tx{
		Inputs:           []chain.TxOutRef{ref(9, 0), ref(1, 3), ref(1, 2)},
		Outputs:          []TxOut{{Address: append([]byte{0x71}, make([]byte, 28)...), Value: Value{Lovelace: 2_000_000}, InlineDatum: datum}},
		Collateral:       []chain.TxOutRef{ref(5, 1)},
		CollateralReturn: &ret,
		Fee:              300_000,
		Redeemers:        []Redeemer{{Tag: RedeemerSpend, Index: 0, Data: datum, Mem: 1, Steps: 2}},
		IsValid:          false,
	}
	h := HeaderSpec{Slot: 10, BlockNo: 1}
	raw, b, err := BuildConwayBlock(h, []Tx{spec})
	if err != nil {
		t.Fatal(err)
	}
	checkBuilt(t, h, []Tx{spec}, raw, b)
	tx := &b.Txs[0]
	if tx.IsValid {
		t.Fatal("built tx is valid")
	}
	if in, ok := tx.RedeemedInput(tx.Redeemers[0]); !ok || in != ref(1, 2) {
		t.Errorf("redeemer 0 redeems %v %v, want %v", in, ok, ref(1, 2))
	}
	outs, first := tx.ProducedOutputs()
	if len(outs) != 1 || first != 1 || outs[0].Value.Lovelace != 5_000_000 {
		t.Errorf("produced %v from %d", outs, first)
	}
	if spent := tx.SpentInputs(); len(spent) != 1 || spent[0] != ref(5, 1) {
		t.Errorf("spent %v", spent)
	}
	if b.PrevHash != (chain.Hash32{}) {
		t.Errorf("prev hash %s for the first block", b.PrevHash)
	}
}

func TestBuildRejects(t *testing.T) {
	addr := append([]byte{0x61}, make([]byte, 28)...)
	base := func() Tx {
		return Tx{Inputs: []chain.TxOutRef{ref(1, 0)}, Outputs: []TxOut{{Address: addr}}, IsValid: true}
	}
	d := []byte{0x01}
	cases := map[string]func(*Tx){
		"duplicate input":      func(tx *Tx) { tx.Inputs = append(tx.Inputs, ref(1, 0)) },
		"duplicate collateral": func(tx *Tx) { tx.Collateral = []chain.TxOutRef{ref(2, 0), ref(2, 0)} },
		"both datums": func(tx *Tx) {
			h := DatumHash(d)
			tx.Outputs[0].DatumHash, tx.Outputs[0].InlineDatum = &h, d
		},
		"no address":          func(tx *Tx) { tx.Outputs[0].Address = nil },
		"bad inline datum":    func(tx *Tx) { tx.Outputs[0].InlineDatum = []byte{0x82, 0x01} },
		"datum under bad key": func(tx *Tx) { tx.Datums = map[chain.Hash32][]byte{{}: d} },
		"datum two items":     func(tx *Tx) { tx.Datums = map[chain.Hash32][]byte{DatumHash([]byte{1, 2}): {1, 2}} },
		"duplicate redeemer":  func(tx *Tx) { tx.Redeemers = []Redeemer{{Data: d}, {Data: d}} },
		"empty redeemer":      func(tx *Tx) { tx.Redeemers = []Redeemer{{}} },
		"duplicate label":     func(tx *Tx) { tx.Metadata = []Metadatum{{1, d}, {1, d}} },
		"bad metadata":        func(tx *Tx) { tx.Metadata = []Metadatum{{1, []byte{0xff}}} },
		"zero mint":           func(tx *Tx) { tx.Mint = []MintAsset{{Name: []byte("a")}} },
		"long asset name": func(tx *Tx) {
			tx.Outputs[0].Value.Assets = []Asset{{Name: make([]byte, 33), Quantity: 1}}
		},
		"duplicate asset": func(tx *Tx) {
			tx.Outputs[0].Value.Assets = []Asset{{Name: []byte("a"), Quantity: 1}, {Name: []byte("a"), Quantity: 2}}
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			tx := base()
			mutate(&tx)
			if _, _, err := BuildConwayBlock(HeaderSpec{}, []Tx{tx}); err == nil {
				t.Error("no error")
			} else {
				t.Log(err)
			}
			if _, err := TxSize(&tx); err == nil {
				t.Error("TxSize: no error")
			}
		})
	}
	if _, b, err := BuildConwayBlock(HeaderSpec{}, []Tx{base()}); err != nil || len(b.Txs) != 1 {
		t.Fatalf("base tx: %v", err)
	}
}

// fullBlock draws transactions with tx until one does not fit in a block
// body and returns those before it, with their size.
func fullBlock(tb testing.TB, tx func() Tx) ([]Tx, BodySize) {
	tb.Helper()
	var specs []Tx
	var size BodySize
	for {
		spec := tx()
		next, err := size.Plus(&spec)
		if err != nil {
			tb.Fatal(err)
		}
		if next.Total() > MaxBlockBodySize {
			return specs, size
		}
		specs, size = append(specs, spec), next
	}
}
