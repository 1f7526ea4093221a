package plutusdata

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// MarshalJSON writes d in the cardano-cli "detailed schema":
// {"constructor":n,"fields":[...]}, {"map":[{"k":..,"v":..}]}, {"list":[...]},
// {"int":n} and {"bytes":"hex"}. Integers are written exactly.
func MarshalJSON(d Data) []byte {
	return appendJSON(make([]byte, 0, 256), d)
}

func appendJSON(dst []byte, d Data) []byte {
	switch x := d.(type) {
	case *Constr:
		dst = append(dst, `{"constructor":`...)
		dst = strconv.AppendUint(dst, x.Index, 10)
		dst = append(dst, `,"fields":`...)
		dst = appendJSONList(dst, x.Fields)
		return append(dst, '}')
	case *List:
		dst = append(dst, `{"list":`...)
		dst = appendJSONList(dst, x.Items)
		return append(dst, '}')
	case *Map:
		dst = append(dst, `{"map":[`...)
		for i, p := range x.Pairs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"k":`...)
			dst = appendJSON(dst, p.Key)
			dst = append(dst, `,"v":`...)
			dst = appendJSON(dst, p.Value)
			dst = append(dst, '}')
		}
		return append(dst, "]}"...)
	case *Integer:
		dst = append(dst, `{"int":`...)
		dst = append(dst, x.String()...)
		return append(dst, '}')
	case *Bytes:
		dst = append(dst, `{"bytes":"`...)
		dst = hex.AppendEncode(dst, x.B)
		return append(dst, `"}`...)
	}
	panic("plutusdata: JSON of a nil or foreign Data value")
}

func appendJSONList(dst []byte, items []Data) []byte {
	dst = append(dst, '[')
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSON(dst, it)
	}
	return append(dst, ']')
}

// JSONError reports where JSON input does not fit the detailed schema.
type JSONError struct {
	Path   string // for example "fields[2].map[0].k"
	Reason string
}

func (e *JSONError) Error() string {
	if e.Path == "" {
		return "plutus data JSON: " + e.Reason
	}
	return fmt.Sprintf("plutus data JSON at %s: %s", e.Path, e.Reason)
}

// UnmarshalJSON reads a value in the cardano-cli detailed schema. Integers
// are read exactly, whatever their size.
func UnmarshalJSON(b []byte) (Data, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &JSONError{Reason: err.Error()}
	}
	if dec.More() {
		return nil, &JSONError{Reason: "trailing data after the value"}
	}
	return FromJSONValue(v, "")
}

// FromJSONValue converts a value decoded by encoding/json with UseNumber.
func FromJSONValue(v any, path string) (Data, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &JSONError{Path: path, Reason: "expected an object"}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sig := strings.Join(keys, ",")
	switch sig {
	case "constructor,fields":
		idx, err := ParseJSONInteger(obj["constructor"])
		if err != nil || idx.Sign() < 0 || !idx.IsUint64() {
			return nil, &JSONError{Path: join(path, "constructor"), Reason: "expected a non-negative integer below 2^64"}
		}
		fields, err := jsonList(obj["fields"], join(path, "fields"))
		if err != nil {
			return nil, err
		}
		return &Constr{Index: idx.Uint64(), Fields: fields}, nil
	case "list":
		items, err := jsonList(obj["list"], join(path, "list"))
		if err != nil {
			return nil, err
		}
		return &List{Items: items}, nil
	case "map":
		arr, ok := obj["map"].([]any)
		if !ok {
			return nil, &JSONError{Path: join(path, "map"), Reason: "expected an array"}
		}
		m := &Map{Pairs: make([]Pair, len(arr))}
		for i, e := range arr {
			p := fmt.Sprintf("%s[%d]", join(path, "map"), i)
			kv, ok := e.(map[string]any)
			if !ok || len(kv) != 2 || kv["k"] == nil || kv["v"] == nil {
				return nil, &JSONError{Path: p, Reason: `expected an object {"k":..,"v":..}`}
			}
			var err error
			if m.Pairs[i].Key, err = FromJSONValue(kv["k"], p+".k"); err != nil {
				return nil, err
			}
			if m.Pairs[i].Value, err = FromJSONValue(kv["v"], p+".v"); err != nil {
				return nil, err
			}
		}
		return m, nil
	case "int":
		n, err := ParseJSONInteger(obj["int"])
		if err != nil {
			return nil, &JSONError{Path: join(path, "int"), Reason: err.Error()}
		}
		return NewBigInt(n), nil
	case "bytes":
		s, ok := obj["bytes"].(string)
		if !ok {
			return nil, &JSONError{Path: join(path, "bytes"), Reason: "expected a hex string"}
		}
		b, err := hex.DecodeString(s)
		if err != nil {
			return nil, &JSONError{Path: join(path, "bytes"), Reason: "bad hex: " + err.Error()}
		}
		return &Bytes{B: b}, nil
	}
	return nil, &JSONError{Path: path, Reason: fmt.Sprintf("unknown shape with keys {%s}", sig)}
}

func jsonList(v any, path string) ([]Data, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, &JSONError{Path: path, Reason: "expected an array"}
	}
	out := make([]Data, len(arr))
	for i, e := range arr {
		d, err := FromJSONValue(e, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// maxExponent bounds the exponent accepted in an integral JSON number such as
// 1e21, so that a hostile 1e999999999 cannot demand gigabytes.
const maxExponent = 4096

// ParseJSONInteger reads an exact integer from a JSON number decoded with
// UseNumber. Plain integer literals of any size are accepted, as are decimal
// and exponent forms whose value is an integer (1e21, 5.0).
func ParseJSONInteger(v any) (*big.Int, error) {
	num, ok := v.(json.Number)
	if !ok {
		return nil, fmt.Errorf("expected an integer")
	}
	s := string(num)
	if n, ok := new(big.Int).SetString(s, 10); ok {
		return n, nil
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || exp > maxExponent || exp < -maxExponent {
			return nil, fmt.Errorf("integer %s: exponent out of range", s)
		}
	}
	if len(s) > maxExponent {
		return nil, fmt.Errorf("number too long")
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() {
		return nil, fmt.Errorf("%s is not an integer", s)
	}
	return r.Num(), nil
}
