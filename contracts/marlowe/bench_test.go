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

// BenchmarkCodecs measures the Marlowe codecs alone on the datum of
// BenchmarkDatum, without the Plutus Data bytes or the JSON text: reading
// and writing the Plutus Data tree, writing core JSON and reading it from
// the generic values encoding/json gives. The redeemer cases read and
// write the inputs of all the real validator runs.
func BenchmarkCodecs(b *testing.B) {
	d := must(b, pd.Decode, largestDatum(b))
	md := must(b, MarloweDataFromData, d)
	js := must(b, (*MarloweData).MarshalJSON, md)
	jv := must(b, decodeJSON, js)
	var reds []pd.Data
	var redeemers []Redeemer
	var redJSON []any
	for _, f := range loadBenchmarks(b, "semantics") {
		r := must(b, RedeemerFromData, f.redeemer)
		v := must(b, decodeJSON, must(b, Redeemer.MarshalJSON, r))
		reds, redeemers, redJSON = append(reds, f.redeemer), append(redeemers, r), append(redJSON, v)
	}
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"fromdata/datum", func() error { _, err := MarloweDataFromData(d); return err }},
		{"todata/datum", func() error { _ = md.ToData(); return nil }},
		{"tojson/datum", func() error { _, err := md.MarshalJSON(); return err }},
		{"fromjson/datum", func() error { _, err := marloweDataFromJSON(jv); return err }},
		{"fromdata/redeemers", func() error {
			for _, r := range reds {
				if _, err := RedeemerFromData(r); err != nil {
					return err
				}
			}
			return nil
		}},
		{"todata/redeemers", func() error {
			for _, r := range redeemers {
				_ = r.ToData()
			}
			return nil
		}},
		{"tojson/redeemers", func() error {
			for _, r := range redeemers {
				if _, err := r.MarshalJSON(); err != nil {
					return err
				}
			}
			return nil
		}},
		{"fromjson/redeemers", func() error {
			for _, v := range redJSON {
				if _, err := redeemerFromJSON(v); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
