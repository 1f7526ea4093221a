package marlowe

import "math/big"

// The core JSON readers of a contract's state, its inputs and datums, and
// the Parse functions (json_decode.go reads the language).

func stateFromJSON(v any) (*State, error) {
	m, err := record(v, "State", "accounts,boundValues,choices,minTime")
	if err != nil {
		return nil, err
	}
	st := &State{}
	st.Accounts, err = jsonEntries(m, "accounts", func(k any, e *AccountEntry) error {
		key, err := jsonArray(k)
		if err == nil && len(key) != 2 {
			err = shapeError("expected an account key [party, token], found %d elements", len(key))
		}
		if err != nil {
			return err
		}
		if e.Party, err = partyFromJSON(key[0]); err != nil {
			return atIndex(0, err)
		}
		e.Token, err = tokenFromJSON(key[1])
		return atIndex(1, err)
	}, func(e *AccountEntry, v *big.Int) { e.Amount = v })
	if err != nil {
		return nil, err
	}
	st.Choices, err = jsonEntries(m, "choices", func(k any, e *ChoiceEntry) (err error) {
		e.Choice, err = choiceIDFromJSON(k)
		return err
	}, func(e *ChoiceEntry, v *big.Int) { e.Value = v })
	if err != nil {
		return nil, err
	}
	st.BoundValues, err = jsonEntries(m, "boundValues", func(k any, e *BoundValueEntry) (err error) {
		e.Name, err = valueIDFromJSON(k)
		return err
	}, func(e *BoundValueEntry, v *big.Int) { e.Value = v })
	if err != nil {
		return nil, err
	}
	if st.MinTime, err = jsonInt(m["minTime"]); err != nil {
		return nil, at("minTime", err)
	}
	return st, nil
}

// jsonEntries reads the [key, value] pairs of the state's field name, the
// JSON form of stateMap: once every element is known to be a pair, key
// reads a pair's key into its entry and set gives it the pair's value.
func jsonEntries[E any](m map[string]any, name string, key func(any, *E) error, set func(*E, *big.Int)) ([]E, error) {
	arr, err := jsonArray(m[name])
	if err != nil {
		return nil, at(name, err)
	}
	pairs := make([][]any, len(arr))
	for i, e := range arr {
		p, err := jsonArray(e)
		if err == nil && len(p) != 2 {
			err = shapeError("expected a pair [key, value], found %d elements", len(p))
		}
		if err != nil {
			return nil, at(name, atIndex(i, err))
		}
		pairs[i] = p
	}
	out := make([]E, len(pairs))
	for i, p := range pairs {
		if err := key(p[0], &out[i]); err != nil {
			return nil, at(name, atIndex(i, atIndex(0, err)))
		}
		v, err := jsonInt(p[1])
		if err != nil {
			return nil, at(name, atIndex(i, atIndex(1, err)))
		}
		set(&out[i], v)
	}
	return out, nil
}

func inputFromJSON(v any) (Input, error) {
	if _, ok := v.(string); ok {
		content, err := inputContentSum.fromJSON(v)
		return Input{Content: content}, err
	}
	m, _, err := object(v, "Input")
	if err != nil {
		return Input{}, err
	}
	in := Input{}
	content := make(map[string]any, len(m))
	for k, val := range m {
		content[k] = val
	}
	if h, ok := m["continuation_hash"]; ok {
		if in.ContinuationHash, err = jsonHex(h); err != nil {
			return Input{}, at("continuation_hash", err)
		}
		delete(content, "continuation_hash")
		if cv, ok := m["merkleized_continuation"]; ok {
			if in.Continuation, err = contractFromJSON(cv); err != nil {
				return Input{}, at("merkleized_continuation", err)
			}
			delete(content, "merkleized_continuation")
		}
	}
	if _, sig, _ := object(content, "Input"); sig == "" {
		if !in.Merkleized() {
			return Input{}, shapeError("Input: empty object")
		}
		in.Content = notifyInput
		return in, nil
	}
	if in.Content, err = inputContentSum.fromObject(content); err != nil {
		return Input{}, err
	}
	return in, nil
}

func redeemerFromJSON(v any) (Redeemer, error) {
	arr, err := jsonArray(v)
	if err != nil {
		return nil, err
	}
	return eachOf(arr, inputFromJSON)
}

func transactionInputFromJSON(v any) (*TransactionInput, error) {
	r := recordOf(v, "TransactionInput", "tx_inputs,tx_interval")
	return built(&r.fields, &TransactionInput{
		Interval: recordField(&r, "tx_interval", func(v any) (TimeInterval, error) {
			iv, _, err := intervalFromJSON(v, "interval", false)
			return iv, err
		}),
		Inputs: recordField(&r, "tx_inputs", redeemerFromJSON),
	})
}

func marloweDataFromJSON(v any) (*MarloweData, error) {
	m, err := record(v, "MarloweData", "marloweContract,marloweParams,marloweState")
	if err != nil {
		return nil, err
	}
	md := &MarloweData{}
	pm, err := record(m["marloweParams"], "MarloweParams", "rolesCurrency")
	if err != nil {
		return nil, at("marloweParams", err)
	}
	if md.Params.RolesCurrency, err = jsonHex(pm["rolesCurrency"]); err != nil {
		return nil, at("marloweParams", at("rolesCurrency", err))
	}
	st, err := stateFromJSON(m["marloweState"])
	if err != nil {
		return nil, at("marloweState", err)
	}
	md.State = *st
	if md.Contract, err = contractFromJSON(m["marloweContract"]); err != nil {
		return nil, at("marloweContract", err)
	}
	return md, nil
}

func payoutDatumFromJSON(v any) (*PayoutDatum, error) {
	r := recordOf(v, "payout datum", "role,rolesCurrency")
	return built(&r.fields, &PayoutDatum{
		RolesCurrency: recordField(&r, "rolesCurrency", jsonHex),
		Role:          recordField(&r, "role", jsonName),
	})
}

// parse decodes text and converts it with from.
func parse[T any](text []byte, from func(any) (T, error)) (T, error) {
	v, err := decodeJSON(text)
	if err != nil {
		var zero T
		return zero, err
	}
	return from(v)
}

// ParseContractJSON reads a contract from core JSON.
func ParseContractJSON(text []byte) (Contract, error) { return parse(text, contractFromJSON) }

// ParseValueJSON reads a value from core JSON.
func ParseValueJSON(text []byte) (Value, error) { return parse(text, valueFromJSON) }

// ParseObservationJSON reads an observation from core JSON.
func ParseObservationJSON(text []byte) (Observation, error) {
	return parse(text, observationFromJSON)
}

// ParseStateJSON reads a state from core JSON.
func ParseStateJSON(text []byte) (*State, error) { return parse(text, stateFromJSON) }

// ParseInputJSON reads one input from core JSON.
func ParseInputJSON(text []byte) (Input, error) { return parse(text, inputFromJSON) }

// ParseRedeemerJSON reads a JSON array of inputs.
func ParseRedeemerJSON(text []byte) (Redeemer, error) { return parse(text, redeemerFromJSON) }

// ParseTransactionInputJSON reads {"tx_interval":..,"tx_inputs":[..]}.
func ParseTransactionInputJSON(text []byte) (*TransactionInput, error) {
	return parse(text, transactionInputFromJSON)
}

// ParseMarloweDataJSON reads a MarloweData from JSON.
func ParseMarloweDataJSON(text []byte) (*MarloweData, error) {
	return parse(text, marloweDataFromJSON)
}

// ParsePayoutDatumJSON reads {"rolesCurrency":"hex","role":"name"}.
func ParsePayoutDatumJSON(text []byte) (*PayoutDatum, error) {
	return parse(text, payoutDatumFromJSON)
}
