package marlowe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// normalizeJSON returns a generic JSON value with exact integers, so two
// documents compare equal when they hold the same JSON value.
func normalizeJSON(t testing.TB, text []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("bad JSON %s: %v", text, err)
	}
	return normalizeNumbers(t, v)
}

func normalizeNumbers(t testing.TB, v any) any {
	switch x := v.(type) {
	case json.Number:
		n, err := pd.ParseJSONInteger(x)
		if err != nil {
			t.Fatalf("non-integer number %s", x)
		}
		return n.String()
	case []any:
		for i := range x {
			x[i] = normalizeNumbers(t, x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = normalizeNumbers(t, x[k])
		}
	}
	return v
}

// must returns f(a), failing the test or benchmark on an error.
func must[A, T any](t testing.TB, f func(A) (T, error), a A) T {
	t.Helper()
	v, err := f(a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// codec is what the round trips of one Marlowe type go through.
type codec[T any] struct {
	what     string
	parse    func([]byte) (T, error)
	marshal  func(T) ([]byte, error)
	toData   func(T) pd.Data
	fromData func(pd.Data) (T, error)
}

var (
	contractCodec = codec[Contract]{"contract", ParseContractJSON, ContractJSON, ContractToData, ContractFromData}
	stateCodec    = codec[*State]{"state", ParseStateJSON, (*State).MarshalJSON, (*State).ToData, StateFromData}
	inputCodec    = codec[Input]{"input", ParseInputJSON,
		func(in Input) ([]byte, error) { return in.MarshalJSON() },
		func(in Input) pd.Data { return in.ToData() }, InputFromData}
)

// throughData writes v as Plutus Data CBOR and reads it back; it returns
// what it read and the CBOR.
func (c codec[T]) throughData(t *testing.T, where string, v T) (T, []byte) {
	t.Helper()
	enc := pd.Encode(c.toData(v))
	d, err := pd.Decode(enc)
	if err != nil {
		t.Fatalf("%s: %s CBOR: %v", where, c.what, err)
	}
	back, err := c.fromData(d)
	if err != nil {
		t.Fatalf("%s: %s from data: %v", where, c.what, err)
	}
	return back, enc
}

// check checks JSON -> types -> JSON and types -> CBOR -> types.
func (c codec[T]) check(t *testing.T, where string, raw []byte) {
	t.Helper()
	v, err := c.parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	out, err := c.marshal(v)
	if err != nil {
		t.Fatalf("%s: to JSON: %v", where, err)
	}
	if !reflect.DeepEqual(normalizeJSON(t, raw), normalizeJSON(t, out)) {
		t.Fatalf("%s: JSON round trip changed the %s\nin:  %.400s\nout: %.400s", where, c.what, raw, out)
	}
	if back, _ := c.throughData(t, where, v); !reflect.DeepEqual(back, v) {
		t.Fatalf("%s: CBOR round trip changed the %s", where, c.what)
	}
}

type referencePath struct {
	Contract     json.RawMessage `json:"contract"`
	State        json.RawMessage `json:"state"`
	Transactions []struct {
		Input struct {
			TxInputs   []json.RawMessage `json:"tx_inputs"`
			TxInterval json.RawMessage   `json:"tx_interval"`
		} `json:"input"`
		Output struct {
			Contract json.RawMessage `json:"contract"`
			State    json.RawMessage `json:"state"`
		} `json:"output"`
	} `json:"transactions"`
}

// TestReferenceContracts runs every contract of marlowe-cardano's reference
// data, and every contract, state and input of its traces, through both
// codecs.
func TestReferenceContracts(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "marlowe-reference")
	contracts, _ := filepath.Glob(filepath.Join(dir, "*.contract"))
	// shared/design/MARLOWE.md speaks of 26; the data set holds 24 pairs.
	if len(contracts) != 24 {
		t.Fatalf("expected the 24 reference contracts, found %d", len(contracts))
	}
	counts := map[string]int{}
	for _, f := range contracts {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		contractCodec.check(t, filepath.Base(f), raw)
		counts["contract files"]++

		for i, p := range readJSONFile[[]referencePath](t, strings.TrimSuffix(f, ".contract")+".paths") {
			where := fmt.Sprintf("%s path %d", filepath.Base(f), i)
			contractCodec.check(t, where+" contract", p.Contract)
			stateCodec.check(t, where+" state", p.State)
			counts["contracts"]++
			counts["states"]++
			for j, tx := range p.Transactions {
				for k, in := range tx.Input.TxInputs {
					inputCodec.check(t, fmt.Sprintf("%s tx %d input %d", where, j, k), in)
					counts["inputs"]++
				}
				txIn := fmt.Appendf(nil, `{"tx_interval":%s,"tx_inputs":[%s]}`, tx.Input.TxInterval, bytes.Join(toBytes(tx.Input.TxInputs), []byte(",")))
				ti, err := ParseTransactionInputJSON(txIn)
				if err != nil {
					t.Fatalf("%s tx %d: %v", where, j, err)
				}
				tiOut, err := ti.MarshalJSON()
				if err != nil || !reflect.DeepEqual(normalizeJSON(t, txIn), normalizeJSON(t, tiOut)) {
					t.Fatalf("%s tx %d: transaction input round trip: %v", where, j, err)
				}
				contractCodec.check(t, fmt.Sprintf("%s tx %d output contract", where, j), tx.Output.Contract)
				stateCodec.check(t, fmt.Sprintf("%s tx %d output state", where, j), tx.Output.State)
				counts["contracts"]++
				counts["states"]++
			}
		}
	}
	t.Logf("checked %v", counts)
	if counts["inputs"] < 100 {
		t.Fatalf("too few inputs checked: %v", counts)
	}
}

func toBytes(rs []json.RawMessage) [][]byte {
	out := make([][]byte, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

// TestReferenceBigIntegers makes sure the reference data exercises integers
// beyond float64's exact range and that they survive exactly.
func TestReferenceBigIntegers(t *testing.T) {
	raw := []byte(`{"when":[],"timeout":123456789012345678901234567890,"timeout_continuation":{"pay":-98765432109876543210987654321,"from_account":{"role_token":"a"},"to":{"party":{"role_token":"b"}},"token":{"currency_symbol":"","token_name":""},"then":"close"}}`)
	ct, err := ParseContractJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	w := ct.(*When)
	want, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	if w.Timeout.Cmp(want) != 0 {
		t.Fatalf("timeout %s", w.Timeout)
	}
	out, _ := ContractJSON(ct)
	if !bytes.Contains(out, []byte("-98765432109876543210987654321")) || !bytes.Contains(out, []byte("123456789012345678901234567890")) {
		t.Fatalf("big integers lost: %s", out)
	}
	contractCodec.check(t, "big integers", raw)
}
