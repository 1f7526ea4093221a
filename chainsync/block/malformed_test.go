package block

import (
	"bytes"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// Builders of CBOR items for hand-crafted blocks.
type cb = []byte

func cat(items ...cb) cb { return bytes.Join(items, nil) }

func arr(items ...cb) cb {
	var e encoder
	e.array(len(items))
	return cat(append([]cb{e.buf}, items...)...)
}

func indef(items ...cb) cb { return cat(cb{0x9f}, cat(items...), cb{breakByte}) }

func mp(kvs ...cb) cb {
	var e encoder
	e.mapHead(len(kvs) / 2)
	return cat(append([]cb{e.buf}, kvs...)...)
}

func u(v uint64) cb           { var e encoder; e.uint(v); return e.buf }
func neg(v int64) cb          { var e encoder; e.int(v); return e.buf }
func bs(b []byte) cb          { return cborBytes(b) }
func txt(s string) cb         { var e encoder; e.head(majorText, uint64(len(s))); return append(e.buf, s...) }
func tg(n uint64, x cb) cb    { var e encoder; e.tag(n); return append(e.buf, x...) }
func fill(b byte, n int) cb   { return bytes.Repeat([]byte{b}, n) }
func h(v byte) chain.Hash32   { return chain.Hash32(fill(v, 32)) }
func hx(v byte) cb            { return bs(fill(v, 32)) }
func in(v byte, ix uint64) cb { return arr(hx(v), u(ix)) }

var (
	craftAddr = append([]byte{0x71}, fill(0xaa, 28)...)
	craftOut  = arr(bs(craftAddr), u(5))
	datum     = cb{0xd8, 0x79, 0x9f, 0x01, 0xff} // Constr 0 [1], as Plutus encodes it
)

// craftBody returns a body with inputs, one output and a fee, plus extra
// key-value pairs.
func craftBody(extra ...cb) cb {
	return mp(append([]cb{u(0), arr(in(1, 0)), u(1), arr(craftOut), u(2), u(7)}, extra...)...)
}

// craft assembles a Conway block from a valid header and raw body parts.
func craft(bodies, wits []cb, aux, invalid cb) []byte {
	return arr(encodeHeader(HeaderSpec{Slot: 42, BlockNo: 3}, 0, chain.Hash32{}), arr(bodies...), arr(wits...), aux, invalid)
}

// craft1 is a block of one transaction.
func craft1(body, wit, aux cb) []byte { return craft([]cb{body}, []cb{wit}, aux, arr()) }

func TestCraftedForms(t *testing.T) {
	md := []Metadatum{{Label: 674, Value: txt("hi")}}
	spend := Redeemer{Tag: RedeemerSpend, Index: 1, Data: datum, Mem: 10, Steps: 20}
	for _, c := range []struct {
		name  string
		block []byte
		check func(tx *Tx) bool
	}{
		{"shelley aux", craft1(craftBody(), mp(), mp(u(0), mp(u(674), txt("hi")))),
			func(tx *Tx) bool { return reflect.DeepEqual(tx.Metadata, md) }},
		{"allegra aux", craft1(craftBody(), mp(), mp(u(0), arr(mp(u(674), txt("hi")), arr()))),
			func(tx *Tx) bool { return reflect.DeepEqual(tx.Metadata, md) }},
		{"alonzo aux", craft1(craftBody(), mp(), mp(u(0), tg(259, mp(u(1), arr(), u(0), mp(u(674), txt("hi")), u(9), u(1))))),
			func(tx *Tx) bool { return reflect.DeepEqual(tx.Metadata, md) }},
		{"alonzo aux without metadata", craft1(craftBody(), mp(), mp(u(0), tg(259, mp()))),
			func(tx *Tx) bool { return tx.Metadata == nil }},
		{"legacy redeemers", craft1(craftBody(), mp(u(5), arr(arr(u(0), u(1), datum, arr(u(10), u(20))))), mp()),
			func(tx *Tx) bool { return reflect.DeepEqual(tx.Redeemers, []Redeemer{spend}) }},
		{"map redeemers", craft1(craftBody(), mp(u(5), mp(arr(u(0), u(1)), arr(datum, arr(u(10), u(20))))), mp()),
			func(tx *Tx) bool { return reflect.DeepEqual(tx.Redeemers, []Redeemer{spend}) }},
		{"repeated redeemer key", craft1(craftBody(), mp(u(5), cat(cb{0xa2}, arr(u(0), u(1)), arr(u(5), arr(u(1), u(2))), arr(u(0), u(1)), arr(datum, arr(u(10), u(20))))), mp()),
			func(tx *Tx) bool { return reflect.DeepEqual(tx.Redeemers, []Redeemer{spend}) }},
		{"indefinite redeemers", craft1(craftBody(), mp(u(5), indef(indef(u(0), u(1), datum, indef(u(10), u(20))))), mp()),
			func(tx *Tx) bool { return reflect.DeepEqual(tx.Redeemers, []Redeemer{spend}) }},
		{"datums with tag 258", craft1(craftBody(), mp(u(4), tg(258, arr(datum))), mp()),
			func(tx *Tx) bool { return bytes.Equal(tx.Datums[DatumHash(datum)], datum) }},
		{"datums without tag", craft1(craftBody(), mp(u(4), arr(datum, u(3))), mp()),
			func(tx *Tx) bool { return len(tx.Datums) == 2 && bytes.Equal(tx.Datums[DatumHash(u(3))], u(3)) }},
		{"unknown keys", craft1(
			mp(u(0), arr(in(1, 0)), u(99), mp(txt("x"), indef(u(1))), u(1), arr(mp(u(0), bs(craftAddr), u(1), u(5), u(7), arr())),
				u(2), u(7), u(1000000), u(1), u(6), arr(u(1))),
			mp(u(9), arr(u(1)), u(0), arr(arr(hx(1), bs(fill(2, 64))))), mp()),
			func(tx *Tx) bool { return len(tx.Outputs) == 1 && tx.Fee == 7 && len(tx.Inputs) == 1 }},
		{"inputs with a long tag head", craft1(mp(u(0), cat(cb{0xda, 0, 0, 1, 2}, arr(in(2, 1), in(1, 5))), u(1), arr(), u(2), u(0)), mp(), mp()),
			func(tx *Tx) bool {
				return reflect.DeepEqual(tx.Inputs, []chain.TxOutRef{{TxID: h(2), Index: 1}, {TxID: h(1), Index: 5}})
			}},
		{"output forms", craft1(mp(u(0), arr(in(1, 0)), u(2), u(7), u(1), arr(
			arr(bs(craftAddr), u(1), hx(9)),
			mp(u(0), bs(craftAddr), u(1), arr(u(2), mp(bs(fill(3, 28)), mp(bs(nil), u(4), bs([]byte("a")), u(0))))),
			mp(u(0), bs(craftAddr), u(1), u(3), u(2), arr(u(0), hx(8))),
			mp(u(0), bs(craftAddr), u(1), u(3), u(2), arr(u(1), tg(24, bs(datum))), u(3), tg(24, bs(placeholderScript))),
		)), mp(), mp()), func(tx *Tx) bool {
			h9, h8 := h(9), h(8)
			want := []TxOut{
				{Address: craftAddr, Value: Value{Lovelace: 1}, DatumHash: &h9},
				// The zero quantity of asset "a" is dropped, as the ledger does.
				{Address: craftAddr, Value: Value{Lovelace: 2, Assets: []Asset{{Policy: chain.Hash28(fill(3, 28)), Name: []byte{}, Quantity: 4}}}},
				{Address: craftAddr, Value: Value{Lovelace: 3}, DatumHash: &h8},
				{Address: craftAddr, Value: Value{Lovelace: 3}, InlineDatum: datum, HasScriptRef: true},
			}
			return reflect.DeepEqual(tx.Outputs, want)
		}},
		{"invalid list with tag", craft([]cb{craftBody(), craftBody(u(3), u(9))}, []cb{mp(), mp()}, mp(), tg(258, arr(u(1)))),
			func(tx *Tx) bool { return tx.IsValid }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := DecodeBlock(TypeConway, c.block, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(&b.Txs[0]) {
				t.Errorf("%+v", b.Txs[0])
			}
			if c.name == "invalid list with tag" && (b.Txs[1].IsValid || *b.Txs[1].TTL != 9) {
				t.Errorf("tx 1: %+v", b.Txs[1])
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	body, wit := craftBody(), mp()
	one := func(b cb) []byte { return craft1(b, wit, mp()) }
	for _, c := range []struct {
		name  string
		block []byte
		tx    int
		field string
		err   error
	}{
		{"empty input", nil, -1, "block", ErrTruncated},
		{"not an array", u(1), -1, "block", ErrMalformed},
		{"block of 4 entries", arr(encodeHeader(HeaderSpec{}, 0, chain.Hash32{}), arr(), arr(), mp()), -1, "", ErrMalformed},
		{"trailing bytes", append(craft1(body, wit, mp()), 0), -1, "", ErrMalformed},
		{"header body too short", arr(arr(arr(u(1), u(2)), bs(nil)), arr(), arr(), mp(), arr()), -1, "header", ErrMalformed},
		{"slot is text", arr(arr(arr(u(1), txt("x"), cb{0xf6}), bs(nil)), arr(), arr(), mp(), arr()), -1, "header.body.slot", ErrMalformed},
		{"prev hash of 31 bytes", arr(arr(arr(u(1), u(2), bs(fill(1, 31))), bs(nil)), arr(), arr(), mp(), arr()), -1, "header.body.prev_hash", ErrMalformed},
		{"body not a map", one(arr(txt("not a transaction body"))), 0, "body", ErrMalformed},
		{"no fee", one(mp(u(0), arr(), u(1), arr())), 0, "body", ErrMalformed},
		{"duplicate key", one(craftBody(u(2), u(1))), 0, "body", ErrMalformed},
		{"text key", one(mp(txt("a"), u(1))), 0, "body", ErrMalformed},
		{"inputs not an array", one(mp(u(0), u(5), u(1), arr(), u(2), u(0))), 0, "body.inputs", ErrMalformed},
		{"input hash of 33 bytes", one(mp(u(0), arr(arr(bs(fill(1, 33)), u(0))), u(1), arr(), u(2), u(0))), 0, "body.inputs[0]", ErrMalformed},
		{"input index 2^32", one(mp(u(0), arr(arr(hx(1), u(1<<32))), u(1), arr(), u(2), u(0))), 0, "body.inputs[0]", ErrMalformed},
		{"input of 3 entries", one(mp(u(0), arr(arr(hx(1), u(1), u(2))), u(1), arr(), u(2), u(0))), 0, "body.inputs[0]", ErrMalformed},
		{"output is a number", one(craftBody(u(13), arr(in(2, 0)), u(16), u(5))), 0, "body.collateral_return", ErrMalformed},
		{"second output bad", one(mp(u(0), arr(), u(1), arr(craftOut, arr(bs(craftAddr))), u(2), u(0))), 0, "body.outputs[1]", ErrMalformed},
		{"output map without value", one(mp(u(0), arr(), u(1), arr(mp(u(0), bs(craftAddr))), u(2), u(0))), 0, "body.outputs[0]", ErrMalformed},
		{"value is text", one(mp(u(0), arr(), u(1), arr(arr(bs(craftAddr), txt("5"))), u(2), u(0))), 0, "body.outputs[0].value", ErrMalformed},
		{"datum option 2", one(mp(u(0), arr(), u(1), arr(mp(u(0), bs(craftAddr), u(1), u(1), u(2), arr(u(2), hx(1)))), u(2), u(0))), 0, "body.outputs[0].datum_option", ErrMalformed},
		{"inline datum without tag 24", one(mp(u(0), arr(), u(1), arr(mp(u(0), bs(craftAddr), u(1), u(1), u(2), arr(u(1), bs(datum)))), u(2), u(0))), 0, "body.outputs[0].datum_option", ErrMalformed},
		{"inline datum not CBOR", one(mp(u(0), arr(), u(1), arr(mp(u(0), bs(craftAddr), u(1), u(1), u(2), arr(u(1), tg(24, bs(cb{0x82, 1}))))), u(2), u(0))), 0, "body.outputs[0].datum_option", ErrMalformed},
		{"asset name of 33 bytes", one(mp(u(0), arr(), u(1), arr(arr(bs(craftAddr), arr(u(1), mp(bs(fill(1, 28)), mp(bs(fill(2, 33)), u(1)))))), u(2), u(0))), 0, "body.outputs[0].value.assets", ErrMalformed},
		{"policy of 27 bytes", one(craftBody(u(9), mp(bs(fill(1, 27)), mp(bs(nil), u(1))))), 0, "body.mint", ErrMalformed},
		{"mint below int64", one(craftBody(u(9), mp(bs(fill(1, 28)), mp(bs(nil), cat(cb{0x3b}, fill(0xff, 8)))))), 0, "body.mint", ErrMalformed},
		{"negative fee", one(mp(u(0), arr(), u(1), arr(), u(2), neg(-1))), 0, "body.fee", ErrMalformed},
		{"ttl is null", one(craftBody(u(3), cb{0xf6})), 0, "body.ttl", ErrMalformed},
		{"unknown key not CBOR", one(craftBody(u(30), cb{0x1c})), 0, "body.key 30", ErrMalformed},
		{"huge input count", one(mp(u(0), cat(cb{0x9b}, fill(0x7f, 8)), u(1), arr(), u(2), u(0))), 0, "body.inputs", ErrTruncated},
		{"huge address", one(mp(u(0), arr(), u(1), arr(arr(cat(cb{0x5b}, fill(0x7f, 8)), u(0))), u(2), u(0))), 0, "body.outputs[0].address", ErrTruncated},
		{"huge metadata map", craft1(body, wit, mp(u(0), cat(cb{0xbb}, fill(0x3f, 8)))), 0, "auxiliary_data.metadata", ErrTruncated},
		{"huge tx count", arr(encodeHeader(HeaderSpec{}, 0, chain.Hash32{}), cat(cb{0x9a}, fill(0xff, 4)), arr(), mp(), arr()), -1, "transaction_bodies", ErrTruncated},
		{"fewer witness sets", craft([]cb{body, body}, []cb{wit}, mp(), arr()), -1, "", ErrMalformed},
		{"more witness sets", craft([]cb{body}, []cb{wit, wit}, mp(), arr()), -1, "", ErrMalformed},
		{"witness set not a map", craft1(body, arr(), mp()), 0, "witnesses", ErrMalformed},
		{"redeemer tag 256", craft1(body, mp(u(5), arr(arr(u(256), u(0), datum, arr(u(1), u(1))))), mp()), 0, "witnesses.redeemers[0]", ErrMalformed},
		{"redeemer of 3 entries", craft1(body, mp(u(5), arr(arr(u(0), u(0), datum))), mp()), 0, "witnesses.redeemers[0]", ErrMalformed},
		{"redeemer units negative", craft1(body, mp(u(5), mp(arr(u(0), u(0)), arr(datum, arr(neg(-1), u(1))))), mp()), 0, "witnesses.redeemers[0].ex_units.mem", ErrMalformed},
		{"redeemers are text", craft1(body, mp(u(5), txt("r")), mp()), 0, "witnesses.redeemers", ErrMalformed},
		{"datum truncated", craft1(body, mp(u(4), arr(cb{0xd8, 0x79, 0x9f})), mp()), 0, "witnesses.plutus_data[0]", ErrTruncated},
		{"aux for tx 1 of 1", craft1(body, wit, mp(u(1), mp())), -1, "", ErrMalformed},
		{"aux twice", craft1(body, wit, cat(cb{0xa2}, u(0), mp(), u(0), mp())), -1, "", ErrMalformed},
		{"aux is a number", craft1(body, wit, mp(u(0), u(5))), 0, "auxiliary_data", ErrMalformed},
		{"aux with tag 258", craft1(body, wit, mp(u(0), tg(258, mp()))), 0, "auxiliary_data", ErrMalformed},
		{"metadata label is text", craft1(body, wit, mp(u(0), mp(txt("a"), u(1)))), 0, "auxiliary_data.metadata.label", ErrMalformed},
		{"invalid tx 1 of 1", craft([]cb{body}, []cb{wit}, mp(), arr(u(1))), -1, "invalid_transactions", ErrMalformed},
		{"deep datum", craft1(body, mp(u(4), arr(cat(fill(0x9f, MaxDepth+1), fill(0xff, MaxDepth+1)))), mp()), 0, "witnesses.plutus_data[0]", ErrTooDeep},
		{"reserved head", craft1(body, mp(u(4), arr(cb{0x1c})), mp()), 0, "witnesses.plutus_data[0]", ErrMalformed},
		{"break outside", craft1(body, mp(u(4), arr(cb{0xff})), mp()), 0, "witnesses.plutus_data[0]", ErrMalformed},
		{"unknown type", nil, -1, "", ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			typ := TypeConway
			if c.name == "unknown type" {
				typ, c.block = Type(8), mainnet(t, "conway")
			}
			_, err := DecodeBlock(typ, c.block, Options{})
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v", err)
			}
			if de.Tx != c.tx || !strings.HasPrefix(de.Field, c.field) || !errors.Is(err, c.err) || de.Type != typ {
				t.Errorf("got %v\n(tx %d field %q), want tx %d field %q %v", err, de.Tx, de.Field, c.tx, c.field, c.err)
			}
			if de.Offset < 0 || de.Offset > len(c.block) {
				t.Errorf("offset %d of %d", de.Offset, len(c.block))
			}
		})
	}
}

// TestTruncations decodes every prefix of the real blocks: each is an error,
// never a panic, and a prefix that holds the whole header still yields it.
func TestTruncations(t *testing.T) {
	for _, mb := range mainnetBlocks(t) {
		hb, err := DecodeHeader(mb.typ, mb.raw, Options{})
		if err != nil {
			t.Fatal(err)
		}
		step := 1
		if testing.Short() {
			step = 7
		}
		for n := 0; n < len(mb.raw); n += step {
			p := mb.raw[:n]
			if _, err := DecodeBlock(mb.typ, p, Options{}); err == nil && mb.typ.HasPlutus() {
				t.Fatalf("%s: prefix of %d bytes decodes", mb.name, n)
			}
			b, err := DecodeHeader(mb.typ, p, Options{})
			if err == nil && b.Header != hb.Header {
				t.Fatalf("%s: prefix of %d bytes gives header %+v", mb.name, n, b.Header)
			}
		}
	}
}

// TestHugeDeclaredLengths checks that declared lengths are not trusted: a
// small block declaring enormous arrays, maps and strings fails quickly and
// allocates little.
func TestHugeDeclaredLengths(t *testing.T) {
	var inputs [][]byte
	for _, head := range []cb{
		cat(cb{0x9b}, fill(0x0f, 8)), cat(cb{0xbb}, fill(0x0f, 8)), cat(cb{0x5b}, fill(0x0f, 8)), cat(cb{0x9a}, fill(0xff, 4)),
	} {
		for _, at := range []func(cb) []byte{
			func(x cb) []byte { return craft1(mp(u(0), x), mp(), mp()) },
			func(x cb) []byte { return craft1(craftBody(), mp(u(4), arr(x)), mp()) },
			func(x cb) []byte { return craft1(craftBody(), mp(u(5), x), mp()) },
			func(x cb) []byte { return craft1(craftBody(), mp(), mp(u(0), x)) },
			func(x cb) []byte { return arr(encodeHeader(HeaderSpec{}, 0, chain.Hash32{}), x) },
		} {
			inputs = append(inputs, at(head))
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, in := range inputs {
		if _, err := DecodeBlock(TypeConway, in, Options{}); err == nil {
			t.Errorf("%x decodes", in)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("%d inputs allocated %d bytes", len(inputs), n)
	}
}

func FuzzDecodeBlock(f *testing.F) {
	for _, mb := range mainnetBlocks(f) {
		f.Add(uint8(mb.typ), mb.raw)
	}
	g := newGen(5)
	for range 3 {
		raw, _, err := BuildConwayBlock(HeaderSpec{Slot: 1}, []Tx{g.tx(), g.tx()})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(TypeConway), raw)
	}
	f.Add(uint8(TypeConway), craft1(craftBody(), mp(u(5), mp(arr(u(0), u(1)), arr(datum, arr(u(10), u(20))))), mp(u(0), arr(mp(u(1), u(2)), arr()))))
	f.Fuzz(func(t *testing.T, typ uint8, raw []byte) {
		tt := Type(typ % 9)
		hb, herr := DecodeHeader(tt, raw, Options{})
		b, err := DecodeBlock(tt, raw, Options{})
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset < 0 || de.Offset > len(raw) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if herr != nil || hb.Header != b.Header || hb.PrevHash != b.PrevHash {
			t.Fatalf("DecodeHeader %+v %v, DecodeBlock %+v", hb, herr, b.Header)
		}
		c, err := DecodeBlock(tt, raw, Options{Copy: true})
		if err != nil || !reflect.DeepEqual(b, c) || !reflect.DeepEqual(b, b.Clone()) {
			t.Fatalf("copy or clone differs: %v", err)
		}
		for i := range b.Txs {
			if b.Txs[i].Index != i {
				t.Fatalf("tx %d has index %d", i, b.Txs[i].Index)
			}
		}
	})
}
