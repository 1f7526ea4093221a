package marlowe

import (
	"math/big"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// The Plutus Data readers of what a contract carries on the chain: its
// datum (MarloweData, with the state), the redeemer's inputs and the
// payout datum (fromdata.go reads the language).

// MarloweDataFromData reads the datum of a Marlowe semantics output.
func MarloweDataFromData(d pd.Data) (*MarloweData, error) {
	c, err := constr(d, "MarloweData", []int{3})
	if err != nil {
		return nil, err
	}
	md := &MarloweData{}
	pc, err := constr(c.Fields[0], "MarloweParams", []int{1})
	if err != nil {
		return nil, at("marloweParams", err)
	}
	if md.Params.RolesCurrency, err = bytesOf(pc.Fields[0], "rolesCurrency"); err != nil {
		return nil, at("marloweParams", at("rolesCurrency", err))
	}
	st, err := StateFromData(c.Fields[1])
	if err != nil {
		return nil, at("marloweState", err)
	}
	md.State = *st
	if md.Contract, err = ContractFromData(c.Fields[2]); err != nil {
		return nil, at("marloweContract", err)
	}
	return md, nil
}

// StateFromData reads a contract state.
func StateFromData(d pd.Data) (*State, error) {
	c, err := constr(d, "State", []int{4})
	if err != nil {
		return nil, err
	}
	st := &State{}
	st.Accounts, err = stateMap(c.Fields[0], "accounts", "amount", func(k pd.Data, e *AccountEntry) error {
		kc, err := constr(k, "account key", []int{2})
		if err != nil {
			return err
		}
		if e.Party, err = PartyFromData(kc.Fields[0]); err != nil {
			return atIndex(0, err)
		}
		e.Token, err = TokenFromData(kc.Fields[1])
		return atIndex(0, err)
	}, func(e *AccountEntry, v *big.Int) { e.Amount = v })
	if err != nil {
		return nil, err
	}
	st.Choices, err = stateMap(c.Fields[1], "choices", "chosen number", func(k pd.Data, e *ChoiceEntry) (err error) {
		e.Choice, err = ChoiceIDFromData(k)
		return atIndex(0, err)
	}, func(e *ChoiceEntry, v *big.Int) { e.Value = v })
	if err != nil {
		return nil, err
	}
	st.BoundValues, err = stateMap(c.Fields[2], "boundValues", "bound value", func(k pd.Data, e *BoundValueEntry) (err error) {
		e.Name, err = valueIDFromData(k)
		return atIndex(0, err)
	}, func(e *BoundValueEntry, v *big.Int) { e.Value = v })
	if err != nil {
		return nil, err
	}
	if st.MinTime, err = intOf(c.Fields[3], "minTime"); err != nil {
		return nil, at("minTime", err)
	}
	return st, nil
}

// stateMap reads the map of a state's field name into entries: key reads a
// pair's key into its entry, and set gives it the pair's value, an integer
// (valueWhat naming it in a shape error). A failure names the field and the
// pair's index, and for the value [1].
func stateMap[E any](d pd.Data, name, valueWhat string, key func(pd.Data, *E) error, set func(*E, *big.Int)) ([]E, error) {
	pairs, err := mapOf(d, name)
	if err != nil {
		return nil, at(name, err)
	}
	out := make([]E, len(pairs))
	for i, p := range pairs {
		if err := key(p.Key, &out[i]); err != nil {
			return nil, at(name, atIndex(i, err))
		}
		v, err := intOf(p.Value, valueWhat)
		if err != nil {
			return nil, at(name, atIndex(i, atIndex(1, err)))
		}
		set(&out[i], v)
	}
	return out, nil
}

// InputContentFromData reads the content of an input.
func InputContentFromData(d pd.Data) (InputContent, error) { return inputContentSum.fromData(d) }

// InputFromData reads one MarloweTxInput of a redeemer:
// Input 0 [content] or MerkleizedTxInput 1 [content, continuation hash].
func InputFromData(d pd.Data) (Input, error) {
	c, err := constr(d, "MarloweTxInput", []int{1, 2})
	if err != nil {
		return Input{}, err
	}
	content, err := InputContentFromData(c.Fields[0])
	if err != nil {
		return Input{}, err
	}
	in := Input{Content: content}
	if c.Index == 1 {
		if in.ContinuationHash, err = bytesOf(c.Fields[1], "continuation hash"); err != nil {
			return Input{}, at("continuation_hash", err)
		}
	}
	return in, nil
}

// RedeemerFromData reads the redeemer of a Marlowe semantics validator.
func RedeemerFromData(d pd.Data) (Redeemer, error) {
	items, err := listOf(d, "redeemer")
	if err != nil {
		return nil, err
	}
	return eachOf(items, InputFromData)
}

// PayoutDatumFromData reads the datum of a role-payout validator output.
func PayoutDatumFromData(d pd.Data) (*PayoutDatum, error) {
	c, err := constr(d, "payout datum", []int{2})
	if err != nil {
		return nil, err
	}
	cur, err := bytesOf(c.Fields[0], "roles currency")
	if err != nil {
		return nil, at("rolesCurrency", err)
	}
	role, err := bytesOf(c.Fields[1], "role name")
	if err != nil {
		return nil, at("role", err)
	}
	return &PayoutDatum{RolesCurrency: cur, Role: role}, nil
}
