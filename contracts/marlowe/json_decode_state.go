package marlowe

// The core JSON readers of a contract's state, its inputs and datums, and
// the Parse functions (json_decode.go reads the language).

func stateFromJSON(v any) (*State, error) {
	m, sig, err := object(v, "State")
	if err != nil {
		return nil, err
	}
	if sig != "accounts,boundValues,choices,minTime" {
		return nil, unknownKeys("State", sig)
	}
	st := &State{}
	pairs := func(key string) ([][2]any, error) {
		arr, err := jsonArray(m[key])
		if err != nil {
			return nil, at(key, err)
		}
		out := make([][2]any, len(arr))
		for i, e := range arr {
			p, err := jsonArray(e)
			if err == nil && len(p) != 2 {
				err = shapeError("expected a pair [key, value], found %d elements", len(p))
			}
			if err != nil {
				return nil, at(key, atIndex(i, err))
			}
			out[i] = [2]any{p[0], p[1]}
		}
		return out, nil
	}
	accounts, err := pairs("accounts")
	if err != nil {
		return nil, err
	}
	st.Accounts = make([]AccountEntry, len(accounts))
	for i, p := range accounts {
		e := &st.Accounts[i]
		key, err := jsonArray(p[0])
		if err == nil && len(key) != 2 {
			err = shapeError("expected an account key [party, token], found %d elements", len(key))
		}
		if err == nil {
			if e.Party, err = partyFromJSON(key[0]); err != nil {
				err = atIndex(0, err)
			} else if e.Token, err = tokenFromJSON(key[1]); err != nil {
				err = atIndex(1, err)
			}
		}
		if err != nil {
			return nil, at("accounts", atIndex(i, atIndex(0, err)))
		}
		if e.Amount, err = jsonInt(p[1]); err != nil {
			return nil, at("accounts", atIndex(i, atIndex(1, err)))
		}
	}
	choices, err := pairs("choices")
	if err != nil {
		return nil, err
	}
	st.Choices = make([]ChoiceEntry, len(choices))
	for i, p := range choices {
		e := &st.Choices[i]
		if e.Choice, err = choiceIDFromJSON(p[0]); err != nil {
			return nil, at("choices", atIndex(i, atIndex(0, err)))
		}
		if e.Value, err = jsonInt(p[1]); err != nil {
			return nil, at("choices", atIndex(i, atIndex(1, err)))
		}
	}
	bound, err := pairs("boundValues")
	if err != nil {
		return nil, err
	}
	st.BoundValues = make([]BoundValueEntry, len(bound))
	for i, p := range bound {
		e := &st.BoundValues[i]
		if e.Name.Name, err = jsonName(p[0]); err != nil {
			return nil, at("boundValues", atIndex(i, atIndex(0, err)))
		}
		if e.Value, err = jsonInt(p[1]); err != nil {
			return nil, at("boundValues", atIndex(i, atIndex(1, err)))
		}
	}
	if st.MinTime, err = jsonInt(m["minTime"]); err != nil {
		return nil, at("minTime", err)
	}
	return st, nil
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
	_, sig, _ := object(content, "Input")
	if sig == "" {
		if !in.Merkleized() {
			return Input{}, shapeError("Input: empty object")
		}
		in.Content = notifyInput
		return in, nil
	}
	if in.Content, err = inputContentSum.fromObject(content, sig); err != nil {
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
	m, err := record(v, "TransactionInput", "tx_inputs,tx_interval")
	if err != nil {
		return nil, err
	}
	var fs fields
	return built(&fs, &TransactionInput{
		Interval: field(&fs, m["tx_interval"], "tx_interval", func(v any) (TimeInterval, error) {
			iv, _, err := intervalFromJSON(v, "interval", false)
			return iv, err
		}),
		Inputs: field(&fs, m["tx_inputs"], "tx_inputs", redeemerFromJSON),
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
	m, err := record(v, "payout datum", "role,rolesCurrency")
	if err != nil {
		return nil, err
	}
	var fs fields
	return built(&fs, &PayoutDatum{
		RolesCurrency: field(&fs, m["rolesCurrency"], "rolesCurrency", jsonHex),
		Role:          field(&fs, m["role"], "role", jsonName),
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
