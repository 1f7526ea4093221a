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
	d, _ := pd.Decode(raw)
	md, _ := MarloweDataFromData(d)
	pdata, _ := plutigo.Decode(raw)
	for _, c := range []struct {
		name    string
		perByte bool // throughput over the datum's bytes
		run     func() error
	}{
		{"decode/plutigo-data", true, func() error { _, err := plutigo.Decode(raw); return err }},
		{"decode/plutusdata", true, func() error { _, err := pd.Decode(raw); return err }},
		{"decode/marlowe-data", true, func() error {
			d, err := pd.Decode(raw)
			if err == nil {
				_, err = MarloweDataFromData(d)
			}
			return err
		}},
		{"encode/plutigo-data", true, func() error { _, err := plutigo.Encode(pdata); return err }},
		{"encode/plutusdata", true, func() error { _ = pd.Encode(d); return nil }},
		{"encode/marlowe-data", true, func() error { _ = pd.Encode(md.ToData()); return nil }},
		{"json/marlowe-data", false, func() error { _, err := md.MarshalJSON(); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.perByte {
				b.SetBytes(int64(len(raw)))
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
