package marlowe

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// The functions in this file and json_decode_state.go read the Marlowe core
// JSON format: here the language, there the state, the inputs, the datums
// and the Parse functions. They are stricter than the Haskell parser in one
// way that matters: an object must have exactly the keys of one
// constructor, so a typo is an error that names its path instead of a
// silently different contract.

// decodeJSON parses text into generic values, keeping numbers exact.
func decodeJSON(text []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &PathError{Err: fmt.Errorf("invalid JSON: %w", err)}
	}
	if _, err := dec.Token(); err == nil {
		return nil, &PathError{Err: fmt.Errorf("invalid JSON: trailing data after the value")}
	}
	return v, nil
}

func typeOfJSON(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// object returns v as an object with its sorted key signature ("a,b,c").
func object(v any, what string) (map[string]any, string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, "", shapeError("%s: expected an object, found %s", what, typeOfJSON(v))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return m, strings.Join(keys, ","), nil
}

func unknownKeys(what, sig string) error {
	return shapeError("%s: no constructor has the keys {%s}", what, sig)
}

// keysOf returns v as an object and its key signature: the first of want
// whose keys are exactly the object's, or else the signature object gives.
func keysOf(v any, what string, want ...string) (map[string]any, string, error) {
	if m, ok := v.(map[string]any); ok {
		for _, sig := range want {
			if hasKeys(m, sig) {
				return m, sig, nil
			}
		}
	}
	return object(v, what)
}

// hasKeys reports whether the keys of m are those of sig, a signature:
// as many, and each of sig's in m.
func hasKeys(m map[string]any, sig string) bool {
	if strings.Count(sig, ",")+1 != len(m) {
		return false
	}
	for key := range strings.SplitSeq(sig, ",") {
		if _, ok := m[key]; !ok {
			return false
		}
	}
	return true
}

// record returns v as an object with exactly the keys of want, a signature.
func record(v any, what, want string) (map[string]any, error) {
	m, sig, err := keysOf(v, what, want)
	if err == nil && sig != want {
		err = unknownKeys(what, sig)
	}
	return m, err
}

// jsonRecord is an object read as a record: its values by key, and the
// first failure, of the object (not exactly the keys wanted) or of a field.
type jsonRecord struct {
	m map[string]any
	fields
}

// recordOf starts reading v as an object with exactly the keys of want.
func recordOf(v any, what, want string) jsonRecord {
	m, err := record(v, what, want)
	return jsonRecord{m: m, fields: fields{err: err}}
}

// recordField is field for the value of key.
func recordField[T any](r *jsonRecord, key string, dec func(any) (T, error)) T {
	return field(&r.fields, r.m[key], key, dec)
}

func jsonInt(v any) (*big.Int, error) {
	n, err := pd.ParseJSONInteger(v)
	if err != nil {
		if _, ok := v.(json.Number); !ok {
			return nil, shapeError("expected an integer, found %s", typeOfJSON(v))
		}
		return nil, shapeError("%v", err)
	}
	return n, nil
}

func jsonString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", shapeError("expected a string, found %s", typeOfJSON(v))
	}
	return s, nil
}

func jsonName(v any) ([]byte, error) {
	s, err := jsonString(v)
	if err != nil {
		return nil, err
	}
	name, err := NameFromText(s)
	if err != nil {
		return nil, shapeError("%v", err)
	}
	return name, nil
}

func jsonHex(v any) ([]byte, error) {
	s, err := jsonString(v)
	if err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, shapeError("bad hex: %v", err)
	}
	return b, nil
}

func jsonArray(v any) ([]any, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, shapeError("expected an array, found %s", typeOfJSON(v))
	}
	return a, nil
}

func partyFromJSON(v any) (Party, error) {
	m, sig, err := keysOf(v, "Party", "role_token", "address")
	if err != nil {
		return Party{}, err
	}
	switch sig {
	case "role_token":
		role, err := jsonName(m["role_token"])
		if err != nil {
			return Party{}, at("role_token", err)
		}
		return Party{Role: role}, nil
	case "address":
		s, err := jsonString(m["address"])
		if err != nil {
			return Party{}, at("address", err)
		}
		pa, err := ParsePartyAddress(s)
		if err != nil {
			return Party{}, at("address", shapeError("%v", err))
		}
		return Party{Address: pa}, nil
	}
	return Party{}, unknownKeys("Party", sig)
}

func tokenFromJSON(v any) (Token, error) {
	r := recordOf(v, "Token", "currency_symbol,token_name")
	return built(&r.fields, Token{
		Currency: recordField(&r, "currency_symbol", jsonHex),
		Name:     recordField(&r, "token_name", jsonName),
	})
}

func payeeFromJSON(v any) (Payee, error) {
	m, sig, err := keysOf(v, "Payee", "account", "party")
	if err != nil {
		return Payee{}, err
	}
	kind := PayeeAccount
	switch sig {
	case "account":
	case "party":
		kind = PayeeParty
	default:
		return Payee{}, unknownKeys("Payee", sig)
	}
	p, err := partyFromJSON(m[sig])
	if err != nil {
		return Payee{}, at(sig, err)
	}
	return Payee{Kind: kind, Party: p}, nil
}

func choiceIDFromJSON(v any) (ChoiceID, error) {
	r := recordOf(v, "ChoiceId", "choice_name,choice_owner")
	return built(&r.fields, ChoiceID{
		Name:  recordField(&r, "choice_name", jsonName),
		Owner: recordField(&r, "choice_owner", partyFromJSON),
	})
}

func contractFromJSON(v any) (Contract, error) { return contractSum.fromJSON(v) }

func valueIDFromJSON(v any) (ValueID, error) {
	name, err := jsonName(v)
	return ValueID{Name: name}, err
}

func casesFromJSON(v any) ([]Case, error) {
	items, err := jsonArray(v)
	if err != nil {
		return nil, err
	}
	return eachInto(items, caseFromJSON)
}

func caseFromJSON(v any, out *Case) error {
	m, sig, err := keysOf(v, "Case", "case,then", "case,merkleized_then")
	if err != nil {
		return err
	}
	switch sig {
	case "case,then", "case,merkleized_then":
	default:
		return unknownKeys("Case", sig)
	}
	if out.Action, err = actionFromJSON(m["case"]); err != nil {
		return at("case", err)
	}
	if sig == "case,then" {
		if out.Then, err = contractFromJSON(m["then"]); err != nil {
			return at("then", err)
		}
		return nil
	}
	if out.MerkleizedThen, err = jsonHex(m["merkleized_then"]); err != nil {
		return at("merkleized_then", err)
	}
	return nil
}

func actionFromJSON(v any) (Action, error) { return actionSum.fromJSON(v) }

func boundsFromJSON(v any) ([]Bound, error) {
	items, err := jsonArray(v)
	if err != nil {
		return nil, err
	}
	return eachOf(items, func(v any) (Bound, error) {
		iv, _, err := intervalFromJSON(v, "Bound", false)
		return Bound(iv), err
	})
}

func valueFromJSON(v any) (Value, error) { return valueSum.fromJSON(v) }

func observationFromJSON(v any) (Observation, error) { return observationSum.fromJSON(v) }

// UnmarshalJSON reads a party from core JSON.
func (p *Party) UnmarshalJSON(text []byte) error {
	v, err := parse(text, partyFromJSON)
	if err == nil {
		*p = v
	}
	return err
}

// UnmarshalJSON reads a token from core JSON.
func (t *Token) UnmarshalJSON(text []byte) error {
	v, err := parse(text, tokenFromJSON)
	if err == nil {
		*t = v
	}
	return err
}
