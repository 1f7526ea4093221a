package marlowe

import (
	"bytes"
	"testing"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// seedWithVectors adds real datums and redeemers to a fuzz corpus.
func seedWithVectors(f *testing.F, pick func(benchmarkFile) pd.Data) {
	for i, b := range loadBenchmarks(f, "semantics") {
		if i%10 == 0 { // a spread of sizes keeps the fuzzer fast
			f.Add(pd.Encode(pick(b)))
		}
	}
}

// FuzzMarloweData feeds arbitrary CBOR to the MarloweData decoder: no panic,
// and whatever it accepts must encode canonically and decode to the same value.
func FuzzMarloweData(f *testing.F) {
	seedWithVectors(f, func(b benchmarkFile) pd.Data { return b.datum })
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := pd.Decode(in)
		if err != nil {
			return
		}
		md, err := MarloweDataFromData(d)
		if err != nil {
			return
		}
		enc := pd.Encode(md.ToData())
		if !bytes.Equal(enc, pd.Encode(d)) {
			t.Fatal("MarloweData did not re-encode to the canonical form of its input")
		}
		// JSON must not panic; it may refuse what it cannot show (a short
		// address hash, for one).
		if js, err := md.MarshalJSON(); err == nil {
			back, err := ParseMarloweDataJSON(js)
			if err != nil {
				t.Fatalf("JSON the encoder wrote does not read back: %v\n%s", err, js)
			}
			if !bytes.Equal(pd.Encode(back.ToData()), enc) {
				t.Fatal("JSON round trip changed the datum")
			}
		}
	})
}

// FuzzRedeemer does the same for redeemers and payout datums.
func FuzzRedeemer(f *testing.F) {
	seedWithVectors(f, func(b benchmarkFile) pd.Data { return b.redeemer })
	f.Add(mustHexF(f, "d8799f581c0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c454275796572ff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := pd.Decode(in)
		if err != nil {
			return
		}
		if r, err := RedeemerFromData(d); err == nil {
			if !bytes.Equal(pd.Encode(r.ToData()), pd.Encode(d)) {
				t.Fatal("redeemer did not re-encode canonically")
			}
			if js, err := r.MarshalJSON(); err == nil {
				if _, err := ParseRedeemerJSON(js); err != nil {
					t.Fatalf("redeemer JSON does not read back: %v\n%s", err, js)
				}
			}
		}
		if p, err := PayoutDatumFromData(d); err == nil {
			if !bytes.Equal(pd.Encode(p.ToData()), pd.Encode(d)) {
				t.Fatal("payout datum did not re-encode canonically")
			}
		}
	})
}

// FuzzContractJSON feeds arbitrary text to the core JSON reader.
func FuzzContractJSON(f *testing.F) {
	f.Add([]byte(`"close"`))
	f.Add([]byte(`{"when":[{"case":{"notify_if":true},"then":"close"}],"timeout":1,"timeout_continuation":"close"}`))
	f.Add([]byte(`{"pay":{"add":1,"and":{"negate":"time_interval_end"}},"from_account":{"address":"addr1wymhxfddsjj4hgpg9kzymledtu833sel6j3g5z5aw0r0vrg5ezax4"},"to":{"account":{"role_token":"\u00000xff"}},"token":{"currency_symbol":"00","token_name":"t"},"then":"close"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		ct, err := ParseContractJSON(in)
		if err != nil {
			return
		}
		js, err := ContractJSON(ct)
		if err != nil {
			t.Fatalf("a parsed contract does not write: %v", err)
		}
		back, err := ParseContractJSON(js)
		if err != nil {
			t.Fatalf("written JSON does not read back: %v", err)
		}
		if !bytes.Equal(pd.Encode(ContractToData(back)), pd.Encode(ContractToData(ct))) {
			t.Fatal("JSON round trip changed the contract")
		}
	})
}

func mustHexF(f *testing.F, s string) []byte {
	b, err := ParseHexInput([]byte(s))
	if err != nil {
		f.Fatal(err)
	}
	return b
}
