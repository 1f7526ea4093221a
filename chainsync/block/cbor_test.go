package block

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"golang.org/x/crypto/blake2b"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

func TestReaderIntegers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{
		{"05", 5}, {"1805", 5}, {"190005", 5}, {"1a00000005", 5}, {"1b0000000000000005", 5},
		{"17", 23}, {"1818", 24}, {"1bffffffffffffffff", math.MaxUint64},
	} {
		r := reader{buf: mustHex(c.in)}
		if v, err := r.uint(); err != nil || v != c.want || r.pos != len(r.buf) {
			t.Errorf("%s: %d %v at %d", c.in, v, err, r.pos)
		}
	}
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"20", -1, true}, {"3b7fffffffffffffff", math.MinInt64, true}, {"1b7fffffffffffffff", math.MaxInt64, true},
		{"3b8000000000000000", 0, false}, {"1b8000000000000000", 0, false}, {"40", 0, false},
	} {
		r := reader{buf: mustHex(c.in)}
		v, err := r.int64()
		if (err == nil) != c.ok || (c.ok && v != c.want) {
			t.Errorf("%s: %d %v", c.in, v, err)
		}
	}
	for _, in := range []string{"", "18", "1900", "1a000000", "1b00000000000000", "1c", "1f", "3f", "20"} {
		r := reader{buf: mustHex(in)}
		if v, err := r.uint(); err == nil {
			t.Errorf("%q: %d, want an error", in, v)
		}
	}
	r := reader{buf: mustHex("1b0000000100000000")}
	if _, err := r.uint32(); err == nil {
		t.Error("uint32 accepted 2^32")
	}
}

func TestReaderBytes(t *testing.T) {
	buf := mustHex("43010203")
	r := reader{buf: buf}
	b, err := r.bytes()
	if err != nil || !bytes.Equal(b, []byte{1, 2, 3}) || &b[0] != &buf[1] || cap(b) != 3 {
		t.Errorf("definite: %x %v (cap %d)", b, err, cap(b))
	}
	for _, c := range []struct {
		in   string
		want []byte
		err  error
	}{
		{"5f4201024103", nil, ErrTruncated},
		{"5f42010241035f", nil, ErrMalformed},
		{"5f4201024103ff", []byte{1, 2, 3}, nil},
		{"5fff", []byte{}, nil},
		{"5f5f4101ffff", nil, ErrMalformed},
		{"5f6161ff", nil, ErrMalformed},
		{"5f4501ff", nil, ErrTruncated},
		{"5b00000000ffffffff00", nil, ErrTruncated},
		{"6161", nil, ErrMalformed},
	} {
		r := reader{buf: mustHex(c.in)}
		b, err := r.bytes()
		if !errors.Is(err, c.err) || (c.err == nil && !bytes.Equal(b, c.want)) {
			t.Errorf("%s: %x %v, want %x %v", c.in, b, err, c.want, c.err)
		}
	}
	chunked := []byte{0x5f, 0x58, 0x10}
	chunked = append(chunked, bytes.Repeat([]byte{7}, 16)...)
	chunked = append(chunked, 0x50)
	chunked = append(chunked, bytes.Repeat([]byte{7}, 16)...)
	r = reader{buf: append(chunked, 0xff)}
	if h, err := r.hash32(); err != nil || h != (chain.Hash32(bytes.Repeat([]byte{7}, 32))) {
		t.Errorf("chunked hash: %s %v", h, err)
	}
	r = reader{buf: mustHex("4101")}
	if _, err := r.hash28(); !errors.Is(err, ErrMalformed) {
		t.Errorf("short hash: %v", err)
	}
}

func TestSkip(t *testing.T) {
	valid := []string{
		"00", "3b7fffffffffffffff", "f6", "f4", "f5", "f7", "f820", "f93c00", "fa47c35000", "fb3ff199999999999a",
		"80", "9fff", "9f01029f03ffff", "a0", "bfff", "bf0102ff", "bf01bf0203ffff", "c24101", "d9010280",
		"d8184401020304", "5f4101ff", "7f6161ff", "820102", "a201020304", "9f820102a1019f00ffff",
		"c1c1c1c100", "1b0000000000000001", "5800", "7800",
	}
	for _, in := range valid {
		b := mustHex(in)
		r := reader{buf: append(b, 0xee)}
		if err := r.skip(); err != nil || r.pos != len(b) {
			t.Errorf("%s: %v, at %d of %d", in, err, r.pos, len(b))
		}
		if err := checkItem(b); err != nil {
			t.Errorf("checkItem %s: %v", in, err)
		}
	}
	invalid := map[string]error{
		"":                     ErrTruncated,
		"ff":                   ErrMalformed,
		"1c":                   ErrMalformed,
		"3f":                   ErrMalformed,
		"df":                   ErrMalformed,
		"f818":                 ErrMalformed,
		"9f":                   ErrTruncated,
		"9f01":                 ErrTruncated,
		"bf01ff":               ErrMalformed,
		"a1":                   ErrTruncated,
		"a101":                 ErrTruncated,
		"82":                   ErrTruncated,
		"8201":                 ErrTruncated,
		"c1":                   ErrTruncated,
		"44010203":             ErrTruncated,
		"5f4101":               ErrTruncated,
		"5f6101ff":             ErrMalformed,
		"7f5f41ffff":           ErrMalformed,
		"9bffffffff":           ErrTruncated,
		"9b7fffffffffffffff01": ErrTruncated,
		"bb4000000000000000":   ErrTruncated,
		"5bffffffffffffffff":   ErrTruncated,
		"fc":                   ErrMalformed,
	}
	for in, want := range invalid {
		r := reader{buf: mustHex(in)}
		if err := r.skip(); !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", in, err, want)
		}
	}
	if err := checkItem(mustHex("0000")); err == nil {
		t.Error("checkItem accepted two items")
	}
}

func TestSkipDepth(t *testing.T) {
	nested := func(open []byte, close []byte, n int) []byte {
		b := bytes.Repeat(open, n)
		b = append(b, 0x00)
		return append(b, bytes.Repeat(close, n)...)
	}
	for _, c := range []struct {
		name string
		in   []byte
		err  error
	}{
		{"indefinite arrays at the limit", nested([]byte{0x9f}, []byte{0xff}, MaxDepth), nil},
		{"indefinite arrays past the limit", nested([]byte{0x9f}, []byte{0xff}, MaxDepth+1), ErrTooDeep},
		{"indefinite maps past the limit", nested([]byte{0xbf, 0x00}, []byte{0xff}, MaxDepth+1), ErrTooDeep},
		{"definite arrays, 200000 deep", nested([]byte{0x81}, nil, 200000), nil},
		{"tags, 200000 deep", nested([]byte{0xc1}, nil, 200000), nil},
		{"unclosed indefinite arrays", bytes.Repeat([]byte{0x9f}, 1000), ErrTruncated},
	} {
		r := reader{buf: c.in}
		err := r.skip()
		if !errors.Is(err, c.err) || (err == nil && r.pos != len(c.in)) {
			t.Errorf("%s: %v at %d, want %v", c.name, err, r.pos, c.err)
		}
	}
	in := nested([]byte{0x9f}, []byte{0xff}, 30)
	allocs := testing.AllocsPerRun(10, func() {
		r := reader{buf: in}
		_ = r.skip()
	})
	if allocs != 0 {
		t.Errorf("skip of 30 levels allocates %.0f times", allocs)
	}
}

// mangler re-encodes CBOR items in randomly chosen non-canonical but valid
// forms: over-long heads, indefinite-length arrays and maps, and byte strings
// split into chunks. Without a gen it re-encodes them canonically.
type mangler struct{ g *gen }

// mangle reports whether to write the next item in a non-canonical form.
func (m mangler) mangle() bool { return m.g != nil && m.g.rng.IntN(2) == 0 }

func (m mangler) head(e *encoder, major byte, v uint64) {
	if m.g == nil {
		e.head(major, v)
		return
	}
	widths := []int{}
	if v < 24 {
		widths = append(widths, 0)
	}
	for _, w := range []int{1, 2, 4, 8} {
		if w == 8 || v < 1<<(8*w) {
			widths = append(widths, w)
		}
	}
	w := widths[m.g.rng.IntN(len(widths))]
	switch w {
	case 0:
		e.buf = append(e.buf, major<<5|byte(v))
	default:
		info := map[int]byte{1: 24, 2: 25, 4: 26, 8: 27}[w]
		e.buf = append(e.buf, major<<5|info)
		for i := w - 1; i >= 0; i-- {
			e.buf = append(e.buf, byte(v>>(8*i)))
		}
	}
}

// item mangles one item of r into e.
func (m mangler) item(r *reader, e *encoder) {
	start := r.pos
	major, info, arg, err := r.head()
	if err != nil {
		panic(err)
	}
	switch major {
	case majorUint, majorNegint:
		m.head(e, major, arg)
	case majorBytes, majorText:
		data := readString(r, info, arg)
		if major == majorBytes && m.mangle() {
			e.buf = append(e.buf, 0x5f)
			for len(data) > 0 {
				n := 1 + m.g.rng.IntN(len(data))
				m.head(e, majorBytes, uint64(n))
				e.raw(data[:n])
				data = data[n:]
			}
			e.buf = append(e.buf, breakByte)
			return
		}
		m.head(e, major, uint64(len(data)))
		e.raw(data)
	case majorArray, majorMap:
		inner, n := readItems(r, major, info, arg, m.item)
		if m.mangle() {
			e.buf = append(e.buf, major<<5|infoIndefinite)
			e.raw(inner)
			e.buf = append(e.buf, breakByte)
			return
		}
		m.head(e, major, n)
		e.raw(inner)
	case majorTag:
		m.head(e, majorTag, arg)
		m.item(r, e)
	default:
		e.raw(r.buf[start:r.pos])
	}
}

// readItems reads the content of an array or a map whose head has been
// read, of either length form, writing each item with item; it returns
// what item wrote and the number of entries (of pairs, for a map).
func readItems(r *reader, major, info byte, arg uint64, item func(*reader, *encoder)) ([]byte, uint64) {
	per := 1
	if major == majorMap {
		per = 2
	}
	var inner encoder
	n := 0
	for ; info == infoIndefinite && r.buf[r.pos] != breakByte || info != infoIndefinite && n < int(arg)*per; n++ {
		item(r, &inner)
	}
	if info == infoIndefinite {
		r.pos++
	}
	return inner.buf, uint64(n / per)
}

// readString reads the content of a byte or text string whose head has been
// read, joining the chunks of an indefinite-length one.
func readString(r *reader, info byte, arg uint64) []byte {
	if info != infoIndefinite {
		data := r.buf[r.pos : r.pos+int(arg)]
		r.pos += int(arg)
		return data
	}
	var data []byte
	for r.buf[r.pos] != breakByte {
		_, _, n, _ := r.head()
		data = append(data, r.buf[r.pos:r.pos+int(n)]...)
		r.pos += int(n)
	}
	r.pos++
	return data
}

// normalize re-encodes one CBOR item canonically.
func normalize(b []byte) []byte {
	r := reader{buf: b}
	var e encoder
	mangler{}.item(&r, &e)
	return e.buf
}

// normalTx replaces the raw CBOR fields of a decoded transaction by their
// canonical form, so that decodings of differently encoded blocks compare.
func normalTx(tx Tx) Tx {
	c := canonicalTx(tx)
	c.ID, c.Index = chain.Hash32{}, 0
	if c.Datums != nil {
		ds := map[chain.Hash32][]byte{}
		for _, d := range c.Datums {
			n := normalize(d)
			ds[DatumHash(n)] = n
		}
		c.Datums = ds
	}
	for i := range c.Redeemers {
		c.Redeemers[i].Data = normalize(c.Redeemers[i].Data)
	}
	for i := range c.Metadata {
		c.Metadata[i].Value = normalize(c.Metadata[i].Value)
	}
	return c
}

// TestEncodingVariants re-encodes the bodies of built and mainnet blocks in
// non-canonical forms and checks that they decode to the same transactions,
// with ids hashed over the re-encoded bodies.
func TestEncodingVariants(t *testing.T) {
	g := newGen(3)
	m := mangler{g}
	var blocks [][]byte
	for _, mb := range mainnetBlocks(t) {
		if mb.typ.HasPlutus() {
			blocks = append(blocks, mb.raw)
		}
	}
	for range 30 {
		specs := make([]Tx, 1+g.rng.IntN(5))
		for i := range specs {
			specs[i] = g.tx()
		}
		raw, _, err := BuildConwayBlock(HeaderSpec{Slot: 5}, specs)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, raw)
	}
	types := map[int]Type{0: TypeAlonzo, 1: TypeBabbage, 2: TypeConway}
	same := 0
	for n, raw := range blocks {
		typ := TypeConway
		if tt, ok := types[n]; ok {
			typ = tt
		}
		want, err := DecodeBlock(typ, raw, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for variant := range 5 {
			r := reader{buf: raw}
			l, _ := r.array(1)
			hstart := r.pos
			_ = r.skip()
			var e encoder
			m.head(&e, majorArray, uint64(l.n))
			e.raw(raw[hstart:r.pos])
			// Bodies one by one, to know the bytes each id is hashed over.
			bl, _ := r.array(1)
			var bodies encoder
			var ids []chain.Hash32
			for range bl.n {
				var b encoder
				m.item(&r, &b)
				ids = append(ids, blake2b.Sum256(b.buf))
				bodies.raw(b.buf)
			}
			if g.rng.IntN(2) == 0 {
				e.buf = append(e.buf, 0x9f)
				e.raw(bodies.buf)
				e.buf = append(e.buf, breakByte)
			} else {
				m.head(&e, majorArray, uint64(bl.n))
				e.raw(bodies.buf)
			}
			for range 3 {
				m.item(&r, &e)
			}
			if bytes.Equal(e.buf, raw) {
				same++
			}
			got, err := DecodeBlock(typ, e.buf, Options{})
			if err != nil {
				t.Fatalf("block %d variant %d: %v", n, variant, err)
			}
			if got.Header != want.Header || got.PrevHash != want.PrevHash || len(got.Txs) != len(want.Txs) {
				t.Fatalf("block %d variant %d: header %+v, want %+v", n, variant, got.Header, want.Header)
			}
			for i := range got.Txs {
				if got.Txs[i].ID != ids[i] {
					t.Errorf("block %d variant %d tx %d: id %s, want %s", n, variant, i, got.Txs[i].ID, ids[i])
				}
				if a, b := normalTx(got.Txs[i]), normalTx(want.Txs[i]); !reflect.DeepEqual(a, b) {
					t.Errorf("block %d variant %d tx %d:\n got %+v\nwant %+v", n, variant, i, a, b)
				}
			}
		}
	}
	if same > 0 {
		t.Errorf("%d variants were the original encoding", same)
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"9f0102ff":           "820102",
		"1b0000000000000001": "01",
		"5f41014102ff":       "420102",
		"7f6161ff":           "6161",
		"d9010280":           "d90102" + "80",
		"bf01a0ff":           "a101a0",
	} {
		if got := fmt.Sprintf("%x", normalize(mustHex(in))); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
