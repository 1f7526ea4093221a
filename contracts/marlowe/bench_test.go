package marlowe

import (
	"testing"

	plutigo "github.com/blinklabs-io/plutigo/data"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// largestDatum returns the canonical CBOR of the largest MarloweData among the
// real validator runs.
func largestDatum(b *testing.B) []byte {
	var best []byte
	for _, f := range loadBenchmarks(b, "semantics") {
		if enc := pd.Encode(f.datum); len(enc) > len(best) {
			best = enc
		}
	}
	return best
}

// BenchmarkDatum measures decoding and encoding of the largest real Marlowe
// datum. The plutigo cases are the baseline: blinklabs-io/plutigo's data
// package, which gouroboros uses, doing the generic part of the same work.
func BenchmarkDatum(b *testing.B) {
	raw := largestDatum(b)
	b.Logf("datum of %d bytes", len(raw))

	b.Run("decode/plutigo-data", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := plutigo.Decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/plutusdata", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pd.Decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/marlowe-data", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			d, err := pd.Decode(raw)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := MarloweDataFromData(d); err != nil {
				b.Fatal(err)
			}
		}
	})
	d, _ := pd.Decode(raw)
	md, _ := MarloweDataFromData(d)
	pdata, _ := plutigo.Decode(raw)
	b.Run("encode/plutigo-data", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := plutigo.Encode(pdata); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/plutusdata", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			_ = pd.Encode(d)
		}
	})
	b.Run("encode/marlowe-data", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			_ = pd.Encode(md.ToData())
		}
	})
	b.Run("json/marlowe-data", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := md.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
