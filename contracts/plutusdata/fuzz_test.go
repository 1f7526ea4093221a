package plutusdata

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoder. It must never panic, and
// whatever it accepts must survive canonical re-encoding unchanged in value,
// with canonical encoding a fixed point.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"d8799f581c0102ff", "9f0102ff", "bf0102ff", "5f4101ff", "c249010000000000000000",
		"d86682188080", "d90500 9f01ff", "9b00ffffffffffffff", "8181818100",
	} {
		f.Add(mustHex(f, s))
	}
	files, _ := filepath.Glob("../../testdata/marlowe-plutus-benchmarks/semantics/*.benchmark")
	for i, file := range files {
		if i >= 8 {
			break
		}
		if raw, err := os.ReadFile(file); err == nil {
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := Decode(in)
		if err != nil {
			return
		}
		enc := Encode(d)
		back, err := Decode(enc)
		if err != nil {
			t.Fatalf("canonical encoding does not decode: %v", err)
		}
		if !Equal(back, d) {
			t.Fatal("value changed through canonical encoding")
		}
		if again := Encode(back); !bytes.Equal(again, enc) {
			t.Fatal("canonical encoding is not a fixed point")
		}
		if n, err := Skip(in); err != nil || n != len(in) {
			t.Fatalf("Skip disagrees with Decode: %d %v", n, err)
		}
	})
}

// FuzzUnmarshalJSON feeds arbitrary text to the JSON reader: no panic, and an
// accepted value writes back to JSON that reads to the same value.
func FuzzUnmarshalJSON(f *testing.F) {
	for _, s := range []string{
		`{"constructor":0,"fields":[{"int":1},{"bytes":"00"}]}`,
		`{"map":[{"k":{"list":[]},"v":{"int":-99999999999999999999999}}]}`,
		`{"int":1e3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := UnmarshalJSON(in)
		if err != nil {
			return
		}
		back, err := UnmarshalJSON(MarshalJSON(d))
		if err != nil || !Equal(back, d) {
			t.Fatalf("JSON round trip: %v", err)
		}
	})
}
