package marlowe

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// benchmarkFile is one validator run from marlowe-plutus: the raw CBOR of
// Constr 0 [datum, redeemer, ScriptContext, I cpu, I mem].
type benchmarkFile struct {
	name     string
	datum    pd.Data
	redeemer pd.Data
	txData   []pd.Pair // txInfoData of the ScriptContext: datum hash -> datum
}

func loadBenchmarks(t testing.TB, kind string) []benchmarkFile {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "marlowe-plutus-benchmarks", kind, "*.benchmark"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 100 {
		t.Fatalf("expected 100 %s benchmark files, found %d", kind, len(files))
	}
	out := make([]benchmarkFile, 0, len(files))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := pd.Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		top := d.(*pd.Constr)
		ctx := top.Fields[2].(*pd.Constr)
		txInfo := ctx.Fields[0].(*pd.Constr)
		// Plutus V2 TxInfo: field 10 is txInfoData.
		data := txInfo.Fields[10].(*pd.Map)
		out = append(out, benchmarkFile{
			name: filepath.Base(f), datum: top.Fields[0], redeemer: top.Fields[1], txData: data.Pairs,
		})
	}
	return out
}

// listedHash checks that the ScriptContext lists datum under its hash.
func listedHash(t *testing.T, b benchmarkFile, datum pd.Data, hash [32]byte) {
	t.Helper()
	for _, p := range b.txData {
		if bytes.Equal(p.Key.(*pd.Bytes).B, hash[:]) {
			if !pd.Equal(p.Value, datum) {
				t.Fatalf("%s: txInfoData lists a different datum under hash %x", b.name, hash)
			}
			return
		}
	}
	t.Fatalf("%s: hash %x of the datum is not in txInfoData", b.name, hash)
}

// readDatum reads the datum of b with fromData and checks that it encodes
// back to the same bytes, whose hash the transaction lists; it returns what
// it read and that encoding.
func readDatum[T interface{ ToData() pd.Data }](t *testing.T, b benchmarkFile, fromData func(pd.Data) (T, error)) (T, []byte) {
	t.Helper()
	v, err := fromData(b.datum)
	if err != nil {
		t.Fatalf("%s: datum: %v", b.name, err)
	}
	enc := pd.Encode(v.ToData())
	if !bytes.Equal(enc, pd.Encode(b.datum)) {
		t.Fatalf("%s: re-encoded datum differs", b.name)
	}
	listedHash(t, b, b.datum, DatumHash(enc))
	return v, enc
}

func TestSemanticsBenchmarks(t *testing.T) {
	merkleized := 0
	for _, b := range loadBenchmarks(t, "semantics") {
		md, enc := readDatum(t, b, MarloweDataFromData)

		red, err := RedeemerFromData(b.redeemer)
		if err != nil {
			t.Fatalf("%s: redeemer: %v", b.name, err)
		}
		if !bytes.Equal(pd.Encode(red.ToData()), pd.Encode(b.redeemer)) {
			t.Fatalf("%s: re-encoded redeemer differs", b.name)
		}
		// Merkleized inputs: the continuation is a datum of the transaction,
		// listed under the input's continuation hash, and it is a contract
		// whose merkleization hash is that hash.
		for i, in := range red {
			if !in.Merkleized() {
				continue
			}
			merkleized++
			var h [32]byte
			copy(h[:], in.ContinuationHash)
			found := false
			for _, p := range b.txData {
				if !bytes.Equal(p.Key.(*pd.Bytes).B, in.ContinuationHash) {
					continue
				}
				found = true
				ct, err := ContractFromData(p.Value)
				if err != nil {
					t.Fatalf("%s: input %d: continuation: %v", b.name, i, err)
				}
				if ContinuationHash(ct) != h {
					t.Fatalf("%s: input %d: continuation hash mismatch", b.name, i)
				}
			}
			if !found {
				t.Fatalf("%s: input %d: continuation %x not among the datums", b.name, i, h)
			}
		}
		// JSON of the datum reads back to the same datum.
		js, err := md.MarshalJSON()
		if err != nil {
			t.Fatalf("%s: JSON: %v", b.name, err)
		}
		back, err := ParseMarloweDataJSON(js)
		if err != nil {
			t.Fatalf("%s: JSON back: %v\n%s", b.name, err, js)
		}
		if !bytes.Equal(pd.Encode(back.ToData()), enc) {
			t.Fatalf("%s: JSON round trip changed the datum", b.name)
		}
		rjs, err := red.MarshalJSON()
		if err != nil {
			t.Fatalf("%s: redeemer JSON: %v", b.name, err)
		}
		rback, err := ParseRedeemerJSON(rjs)
		if err != nil || !bytes.Equal(pd.Encode(rback.ToData()), pd.Encode(b.redeemer)) {
			t.Fatalf("%s: redeemer JSON round trip: %v\n%s", b.name, err, rjs)
		}
	}
	t.Logf("%d merkleized inputs checked", merkleized)
}

func TestRolePayoutBenchmarks(t *testing.T) {
	for _, b := range loadBenchmarks(t, "rolepayout") {
		p, enc := readDatum(t, b, PayoutDatumFromData)
		if r, ok := b.redeemer.(*pd.Constr); !ok || r.Index != 0 || len(r.Fields) != 0 {
			t.Fatalf("%s: payout redeemer is not Constr 0 []", b.name)
		}
		js, err := p.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParsePayoutDatumJSON(js)
		if err != nil || !bytes.Equal(pd.Encode(back.ToData()), enc) {
			t.Fatalf("%s: JSON round trip: %v", b.name, err)
		}
	}
}

// TestBenchmarkTxDataHashes checks every datum every script context lists,
// Marlowe or not, against its hash: canonical encoding of real datums.
func TestBenchmarkTxDataHashes(t *testing.T) {
	n := 0
	for _, kind := range []string{"semantics", "rolepayout"} {
		for _, b := range loadBenchmarks(t, kind) {
			for _, p := range b.txData {
				h := DataHash(p.Value)
				if !bytes.Equal(h[:], p.Key.(*pd.Bytes).B) {
					t.Fatalf("%s: a listed datum does not hash to its key", b.name)
				}
				n++
			}
		}
	}
	if n < 200 {
		t.Fatalf("only %d datums checked", n)
	}
}
