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
	m, sig, err := object(v, "Party")
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
	m, sig, err := object(v, "Token")
	if err != nil {
		return Token{}, err
	}
	if sig != "currency_symbol,token_name" {
		return Token{}, unknownKeys("Token", sig)
	}
	cur, err := jsonHex(m["currency_symbol"])
	if err != nil {
		return Token{}, at("currency_symbol", err)
	}
	name, err := jsonName(m["token_name"])
	if err != nil {
		return Token{}, at("token_name", err)
	}
	return Token{Currency: cur, Name: name}, nil
}

func payeeFromJSON(v any) (Payee, error) {
	m, sig, err := object(v, "Payee")
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
	m, sig, err := object(v, "ChoiceId")
	if err != nil {
		return ChoiceID{}, err
	}
	if sig != "choice_name,choice_owner" {
		return ChoiceID{}, unknownKeys("ChoiceId", sig)
	}
	name, err := jsonName(m["choice_name"])
	if err != nil {
		return ChoiceID{}, at("choice_name", err)
	}
	owner, err := partyFromJSON(m["choice_owner"])
	if err != nil {
		return ChoiceID{}, at("choice_owner", err)
	}
	return ChoiceID{Name: name, Owner: owner}, nil
}

func contractFromJSON(v any) (Contract, error) {
	if s, ok := v.(string); ok {
		if s == "close" {
			return closeContract, nil
		}
		return nil, shapeError("Contract: unknown contract %q", s)
	}
	m, sig, err := object(v, "Contract")
	if err != nil {
		return nil, err
	}
	switch sig {
	case "from_account,pay,then,to,token":
		p := &Pay{}
		if p.From, err = partyFromJSON(m["from_account"]); err != nil {
			return nil, at("from_account", err)
		}
		if p.To, err = payeeFromJSON(m["to"]); err != nil {
			return nil, at("to", err)
		}
		if p.Token, err = tokenFromJSON(m["token"]); err != nil {
			return nil, at("token", err)
		}
		if p.Value, err = valueFromJSON(m["pay"]); err != nil {
			return nil, at("pay", err)
		}
		if p.Then, err = contractFromJSON(m["then"]); err != nil {
			return nil, at("then", err)
		}
		return p, nil
	case "else,if,then":
		n := &If{}
		if n.Observation, err = observationFromJSON(m["if"]); err != nil {
			return nil, at("if", err)
		}
		if n.Then, err = contractFromJSON(m["then"]); err != nil {
			return nil, at("then", err)
		}
		if n.Else, err = contractFromJSON(m["else"]); err != nil {
			return nil, at("else", err)
		}
		return n, nil
	case "timeout,timeout_continuation,when":
		w := &When{}
		cases, err := jsonArray(m["when"])
		if err != nil {
			return nil, at("when", err)
		}
		w.Cases = make([]Case, len(cases))
		for i, cv := range cases {
			if err := caseFromJSON(cv, &w.Cases[i]); err != nil {
				return nil, at("when", atIndex(i, err))
			}
		}
		if w.Timeout, err = jsonInt(m["timeout"]); err != nil {
			return nil, at("timeout", err)
		}
		if w.TimeoutContinuation, err = contractFromJSON(m["timeout_continuation"]); err != nil {
			return nil, at("timeout_continuation", err)
		}
		return w, nil
	case "be,let,then":
		l := &Let{}
		if l.Name.Name, err = jsonName(m["let"]); err != nil {
			return nil, at("let", err)
		}
		if l.Value, err = valueFromJSON(m["be"]); err != nil {
			return nil, at("be", err)
		}
		if l.Then, err = contractFromJSON(m["then"]); err != nil {
			return nil, at("then", err)
		}
		return l, nil
	case "assert,then":
		a := &Assert{}
		if a.Observation, err = observationFromJSON(m["assert"]); err != nil {
			return nil, at("assert", err)
		}
		if a.Then, err = contractFromJSON(m["then"]); err != nil {
			return nil, at("then", err)
		}
		return a, nil
	}
	return nil, unknownKeys("Contract", sig)
}

func caseFromJSON(v any, out *Case) error {
	m, sig, err := object(v, "Case")
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

func actionFromJSON(v any) (Action, error) {
	m, sig, err := object(v, "Action")
	if err != nil {
		return nil, err
	}
	switch sig {
	case "deposits,into_account,of_token,party":
		a := &Deposit{}
		if a.IntoAccount, err = partyFromJSON(m["into_account"]); err != nil {
			return nil, at("into_account", err)
		}
		if a.From, err = partyFromJSON(m["party"]); err != nil {
			return nil, at("party", err)
		}
		if a.Token, err = tokenFromJSON(m["of_token"]); err != nil {
			return nil, at("of_token", err)
		}
		if a.Amount, err = valueFromJSON(m["deposits"]); err != nil {
			return nil, at("deposits", err)
		}
		return a, nil
	case "choose_between,for_choice":
		a := &Choice{}
		if a.Choice, err = choiceIDFromJSON(m["for_choice"]); err != nil {
			return nil, at("for_choice", err)
		}
		bounds, err := jsonArray(m["choose_between"])
		if err != nil {
			return nil, at("choose_between", err)
		}
		a.Bounds = make([]Bound, len(bounds))
		for i, bv := range bounds {
			bm, bsig, err := object(bv, "Bound")
			if err == nil && bsig != "from,to" {
				err = unknownKeys("Bound", bsig)
			}
			if err != nil {
				return nil, at("choose_between", atIndex(i, err))
			}
			if a.Bounds[i].From, err = jsonInt(bm["from"]); err != nil {
				return nil, at("choose_between", atIndex(i, at("from", err)))
			}
			if a.Bounds[i].To, err = jsonInt(bm["to"]); err != nil {
				return nil, at("choose_between", atIndex(i, at("to", err)))
			}
		}
		return a, nil
	case "notify_if":
		o, err := observationFromJSON(m["notify_if"])
		if err != nil {
			return nil, at("notify_if", err)
		}
		return &Notify{Observation: o}, nil
	}
	return nil, unknownKeys("Action", sig)
}

// binaryValueJSON maps the key signature of a binary value to its operand
// keys and constructor.
var binaryValueJSON = map[string]struct {
	left, right string
	make        func(l, r Value) Value
}{
	"add,and":        {"add", "and", func(l, r Value) Value { return &AddValue{Left: l, Right: r} }},
	"minus,value":    {"value", "minus", func(l, r Value) Value { return &SubValue{Left: l, Right: r} }},
	"multiply,times": {"multiply", "times", func(l, r Value) Value { return &MulValue{Left: l, Right: r} }},
	"by,divide":      {"divide", "by", func(l, r Value) Value { return &DivValue{Left: l, Right: r} }},
}

func valueFromJSON(v any) (Value, error) {
	switch x := v.(type) {
	case json.Number:
		n, err := jsonInt(x)
		if err != nil {
			return nil, err
		}
		return &Constant{N: n}, nil
	case string:
		switch x {
		case "time_interval_start":
			return timeStart, nil
		case "time_interval_end":
			return timeEnd, nil
		}
		return nil, shapeError("Value: unknown value %q", x)
	}
	m, sig, err := object(v, "Value")
	if err != nil {
		return nil, err
	}
	if bin, ok := binaryValueJSON[sig]; ok {
		l, err := valueFromJSON(m[bin.left])
		if err != nil {
			return nil, at(bin.left, err)
		}
		r, err := valueFromJSON(m[bin.right])
		if err != nil {
			return nil, at(bin.right, err)
		}
		return bin.make(l, r), nil
	}
	switch sig {
	case "amount_of_token,in_account":
		a := &AvailableMoney{}
		if a.Token, err = tokenFromJSON(m["amount_of_token"]); err != nil {
			return nil, at("amount_of_token", err)
		}
		if a.Account, err = partyFromJSON(m["in_account"]); err != nil {
			return nil, at("in_account", err)
		}
		return a, nil
	case "negate":
		inner, err := valueFromJSON(m["negate"])
		if err != nil {
			return nil, at("negate", err)
		}
		return &NegValue{Value: inner}, nil
	case "value_of_choice":
		ch, err := choiceIDFromJSON(m["value_of_choice"])
		if err != nil {
			return nil, at("value_of_choice", err)
		}
		return &ChoiceValue{Choice: ch}, nil
	case "use_value":
		name, err := jsonName(m["use_value"])
		if err != nil {
			return nil, at("use_value", err)
		}
		return &UseValue{Name: ValueID{Name: name}}, nil
	case "else,if,then":
		c := &Cond{}
		if c.Observation, err = observationFromJSON(m["if"]); err != nil {
			return nil, at("if", err)
		}
		if c.Then, err = valueFromJSON(m["then"]); err != nil {
			return nil, at("then", err)
		}
		if c.Else, err = valueFromJSON(m["else"]); err != nil {
			return nil, at("else", err)
		}
		return c, nil
	}
	return nil, unknownKeys("Value", sig)
}

// comparisonJSON maps the key signature of a comparison to its right-hand key
// and constructor.
var comparisonJSON = map[string]struct {
	right string
	make  func(l, r Value) Observation
}{
	"ge_than,value":  {"ge_than", func(l, r Value) Observation { return &ValueGE{Left: l, Right: r} }},
	"gt,value":       {"gt", func(l, r Value) Observation { return &ValueGT{Left: l, Right: r} }},
	"lt,value":       {"lt", func(l, r Value) Observation { return &ValueLT{Left: l, Right: r} }},
	"le_than,value":  {"le_than", func(l, r Value) Observation { return &ValueLE{Left: l, Right: r} }},
	"equal_to,value": {"equal_to", func(l, r Value) Observation { return &ValueEQ{Left: l, Right: r} }},
}

func observationFromJSON(v any) (Observation, error) {
	if bv, ok := v.(bool); ok {
		if bv {
			return trueObservation, nil
		}
		return falseObservation, nil
	}
	m, sig, err := object(v, "Observation")
	if err != nil {
		return nil, err
	}
	if cmp, ok := comparisonJSON[sig]; ok {
		l, err := valueFromJSON(m["value"])
		if err != nil {
			return nil, at("value", err)
		}
		r, err := valueFromJSON(m[cmp.right])
		if err != nil {
			return nil, at(cmp.right, err)
		}
		return cmp.make(l, r), nil
	}
	switch sig {
	case "and,both", "either,or":
		lk, rk := "both", "and"
		if sig == "either,or" {
			lk, rk = "either", "or"
		}
		l, err := observationFromJSON(m[lk])
		if err != nil {
			return nil, at(lk, err)
		}
		r, err := observationFromJSON(m[rk])
		if err != nil {
			return nil, at(rk, err)
		}
		if lk == "both" {
			return &AndObs{Left: l, Right: r}, nil
		}
		return &OrObs{Left: l, Right: r}, nil
	case "not":
		o, err := observationFromJSON(m["not"])
		if err != nil {
			return nil, at("not", err)
		}
		return &NotObs{Observation: o}, nil
	case "chose_something_for":
		ch, err := choiceIDFromJSON(m["chose_something_for"])
		if err != nil {
			return nil, at("chose_something_for", err)
		}
		return &ChoseSomething{Choice: ch}, nil
	}
	return nil, unknownKeys("Observation", sig)
}

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
