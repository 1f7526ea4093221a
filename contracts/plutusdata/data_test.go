package plutusdata

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func bigFromString(s string) *big.Int {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return n
}

// TestDecodeForms checks that every CBOR form the ledger accepts decodes to the
// expected value, and that canonical re-encoding gives the expected bytes.
func TestDecodeForms(t *testing.T) {
	cases := []struct {
		name      string
		in        string
		want      Data
		canonical string // expected re-encoding; empty means identical to in
	}{
		{"small uint", "05", NewInt(5), ""},
		{"uint 24", "1818", NewInt(24), ""},
		{"non-minimal uint", "1900 05", NewInt(5), "05"},
		{"negint", "20", NewInt(-1), ""},
		{"max uint64", "1b ffffffffffffffff", NewBigInt(bigFromString("18446744073709551615")), ""},
		{"min negint64", "3b ffffffffffffffff", NewBigInt(bigFromString("-18446744073709551616")), ""},
		{"bignum 2^64", "c2 49 010000000000000000", NewBigInt(bigFromString("18446744073709551616")), ""},
		{"bignum -2^64-1", "c3 49 010000000000000000", NewBigInt(bigFromString("-18446744073709551617")), ""},
		{"bignum small", "c2 41 05", NewInt(5), "05"},
		{"bignum chunked", "c2 5f 41 01 48 0000000000000000 ff", NewBigInt(bigFromString("18446744073709551616")), "c2 49 010000000000000000"},
		{"empty bytes", "40", NewBytes([]byte{}), ""},
		{"bytes", "43 010203", NewBytes([]byte{1, 2, 3}), ""},
		{"chunked short bytes", "5f 41 01 42 0203 ff", NewBytes([]byte{1, 2, 3}), "43 010203"},
		{"empty chunked bytes", "5f ff", NewBytes([]byte{}), "40"},
		{"definite list", "82 01 02", NewList(NewInt(1), NewInt(2)), "9f 01 02 ff"},
		{"indefinite list", "9f 01 02 ff", NewList(NewInt(1), NewInt(2)), ""},
		{"empty list", "80", NewList(), ""},
		{"empty indefinite list", "9f ff", NewList(), "80"},
		{"constr 0 empty", "d879 80", NewConstr(0), ""},
		{"constr 6 definite", "d87f 81 01", NewConstr(6, NewInt(1)), "d87f 9f 01 ff"},
		{"constr 7", "d90500 9f 01 ff", NewConstr(7, NewInt(1)), ""},
		{"constr 127", "d90578 80", NewConstr(127), ""},
		{"constr 128 via 102", "d866 82 1880 80", NewConstr(128), ""},
		{"constr 3 via 102", "d866 82 03 9f 01 ff", NewConstr(3, NewInt(1)), "d87c 9f 01 ff"},
		{"map definite", "a1 01 02", NewMap(Pair{NewInt(1), NewInt(2)}), ""},
		{"map indefinite", "bf 01 02 03 04 ff", NewMap(Pair{NewInt(1), NewInt(2)}, Pair{NewInt(3), NewInt(4)}), "a2 01 02 03 04"},
		{"map duplicate keys kept in order", "a2 01 02 01 03", NewMap(Pair{NewInt(1), NewInt(2)}, Pair{NewInt(1), NewInt(3)}), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := mustHex(t, c.in)
			got, err := Decode(in)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !Equal(got, c.want) {
				t.Fatalf("decoded %s, want %s", MarshalJSON(got), MarshalJSON(c.want))
			}
			want := in
			if c.canonical != "" {
				want = mustHex(t, c.canonical)
			}
			if enc := Encode(got); !bytes.Equal(enc, want) {
				t.Fatalf("encoded %x, want %x", enc, want)
			}
		})
	}
}

func TestEncodeLongBytesChunked(t *testing.T) {
	b := bytes.Repeat([]byte{0xab}, 130)
	enc := Encode(NewBytes(b))
	var want []byte
	want = append(want, 0x5f, 0x58, 64)
	want = append(want, b[:64]...)
	want = append(want, 0x58, 64)
	want = append(want, b[64:128]...)
	want = append(want, 0x42, 0xab, 0xab, 0xff)
	if !bytes.Equal(enc, want) {
		t.Fatalf("got %x\nwant %x", enc, want)
	}
	exact := Encode(NewBytes(b[:64]))
	if exact[0] != 0x58 || exact[1] != 64 || len(exact) != 66 {
		t.Fatalf("64 bytes must stay definite, got %x", exact[:4])
	}
	back, err := Decode(enc)
	if err != nil || !Equal(back, NewBytes(b)) {
		t.Fatalf("round trip failed: %v", err)
	}
}

func TestEncodeHugeBignumChunked(t *testing.T) {
	v := new(big.Int).Lsh(big.NewInt(1), 600) // 76 bytes
	enc := Encode(NewBigInt(v))
	if enc[0] != 0xc2 || enc[1] != 0x5f {
		t.Fatalf("a bignum of more than 64 bytes must be chunked, got %x", enc[:4])
	}
	back, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if n := back.(*Integer).Big(); n.Cmp(v) != 0 {
		t.Fatalf("got %s", n)
	}
	neg := new(big.Int).Neg(v)
	back, err = Decode(Encode(NewBigInt(neg)))
	if err != nil || back.(*Integer).Big().Cmp(neg) != 0 {
		t.Fatalf("negative bignum round trip: %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := []struct {
		name, in, reason string
	}{
		{"empty", "", "unexpected end of input"},
		{"text", "6161", "text string"},
		{"float", "f93c00", "simple value or float"},
		{"true", "f5", "simple value"},
		{"unknown tag", "d820 01", "tag 32 is not Plutus Data"},
		{"constr tag 128", "d880 80", "tag 128 is not Plutus Data"},
		{"constr tag 1401", "d90579 80", "tag 1401"},
		{"constr fields not array", "d879 01", "fields must be an array"},
		{"tag 102 three items", "d866 83 00 80 00", "two items"},
		{"tag 102 negative index", "d866 82 20 80", "unsigned"},
		{"bignum of int", "c2 01", "must wrap a byte string"},
		{"truncated array", "83 01 02", "exceeds the remaining input"},
		{"truncated head", "81 19 01", "unexpected end of input in an item head"},
		{"truncated bytes", "9f 45 0102 ff", "exceeds the remaining input"},
		{"missing break", "9f 01 02", "before break"},
		{"huge declared array", "9b 00ffffffffffffff", "exceeds the remaining input"},
		{"huge declared bytes", "5b 00ffffffffffffff 00", "exceeds the remaining input"},
		{"huge declared map", "bb 00ffffffffffffff", "exceeds the remaining input"},
		{"text chunk in bytes", "5f 6161 ff", "chunk of an indefinite byte string"},
		{"nested indefinite chunk", "5f 5f ff ff", "chunk of an indefinite byte string"},
		{"lone break", "ff", "unexpected break"},
		{"reserved info", "1c", "reserved additional information"},
		{"indefinite uint", "1f", "indefinite length is not allowed"},
		{"trailing", "01 02", "trailing bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(mustHex(t, c.in))
			if err == nil {
				t.Fatal("expected an error")
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DecodeError", err)
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("error %q does not mention %q", err, c.reason)
			}
		})
	}
}

func TestDecodeDepthLimit(t *testing.T) {
	deep := func(n int) []byte {
		b := bytes.Repeat([]byte{0x81}, n)
		return append(b, 0x00)
	}
	if _, err := (DecodeOptions{MaxDepth: 100}).Decode(deep(99)); err != nil {
		t.Fatalf("depth 99 under a limit of 100: %v", err)
	}
	_, err := (DecodeOptions{MaxDepth: 100}).Decode(deep(100))
	if err == nil || !strings.Contains(err.Error(), "nesting deeper than 100") {
		t.Fatalf("depth 100: %v", err)
	}
	// The default limit holds against a megabyte of nesting without exhausting the stack.
	if _, err := Decode(deep(1 << 20)); err == nil {
		t.Fatal("expected a depth error")
	}
	if _, err := Skip(deep(1 << 20)); err == nil {
		t.Fatal("expected a depth error from Skip")
	}
}

func TestSkip(t *testing.T) {
	in := mustHex(t, "9f 6161 d879 80 5f 41 00 ff bf 01 f5 ff fb 3ff0000000000000 ff 01")
	n, err := Skip(in)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(in)-1 {
		t.Fatalf("skip length %d, want %d", n, len(in)-1)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	d := NewConstr(200,
		NewMap(Pair{NewBytes([]byte{0xde, 0xad}), NewList(NewInt(-7), NewBigInt(bigFromString("123456789012345678901234567890")))}),
		NewBytes(nil),
	)
	js := MarshalJSON(d)
	want := `{"constructor":200,"fields":[{"map":[{"k":{"bytes":"dead"},"v":{"list":[{"int":-7},{"int":123456789012345678901234567890}]}}]},{"bytes":""}]}`
	if string(js) != want {
		t.Fatalf("got %s\nwant %s", js, want)
	}
	back, err := UnmarshalJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(back, d) {
		t.Fatalf("round trip changed the value: %s", MarshalJSON(back))
	}
}

func TestJSONRejects(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"int":1.5}`, "at int: 1.5 is not an integer"},
		{`{"int":"1"}`, "at int: expected an integer"},
		{`{"bytes":"zz"}`, "at bytes: bad hex"},
		{`{"constructor":-1,"fields":[]}`, "at constructor"},
		{`{"list":[{"int":1},{"nope":1}]}`, "at list[1]: unknown shape with keys {nope}"},
		{`{"map":[{"k":{"int":1}}]}`, "at map[0]"},
		{`{"int":1e99999}`, "exponent out of range"},
		{`[1]`, "expected an object"},
		{`{"int":1} x`, "trailing"},
	}
	for _, c := range cases {
		_, err := UnmarshalJSON([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.in, err, c.want)
		}
	}
	n, err := UnmarshalJSON([]byte(`{"int":1e21}`))
	if err != nil || n.(*Integer).String() != "1000000000000000000000" {
		t.Fatalf("1e21: %v %v", n, err)
	}
}

// TestBenchmarkFilesRoundTrip decodes every real validator-run file (datum,
// redeemer and script context written by the Plutus serialiser) and checks
// that canonical re-encoding reproduces the file byte for byte.
func TestBenchmarkFilesRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../../testdata/marlowe-plutus-benchmarks/*/*.benchmark")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 200 {
		t.Fatalf("found only %d benchmark files", len(files))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		if enc := Encode(d); !bytes.Equal(enc, raw) {
			t.Fatalf("%s: canonical re-encoding differs from the original", filepath.Base(f))
		}
		js := MarshalJSON(d)
		back, err := UnmarshalJSON(js)
		if err != nil || !Equal(back, d) {
			t.Fatalf("%s: JSON round trip: %v", filepath.Base(f), err)
		}
	}
}
