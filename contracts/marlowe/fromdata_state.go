package marlowe

import pd "github.com/marlowe-follower/follower/contracts/plutusdata"

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
	accounts, err := mapOf(c.Fields[0], "accounts")
	if err != nil {
		return nil, at("accounts", err)
	}
	st.Accounts = make([]AccountEntry, len(accounts))
	for i, p := range accounts {
		e := &st.Accounts[i]
		k, err := constr(p.Key, "account key", []int{2})
		if err != nil {
			return nil, at("accounts", atIndex(i, err))
		}
		if e.Party, err = PartyFromData(k.Fields[0]); err != nil {
			return nil, at("accounts", atIndex(i, atIndex(0, err)))
		}
		if e.Token, err = TokenFromData(k.Fields[1]); err != nil {
			return nil, at("accounts", atIndex(i, atIndex(0, err)))
		}
		if e.Amount, err = intOf(p.Value, "amount"); err != nil {
			return nil, at("accounts", atIndex(i, atIndex(1, err)))
		}
	}
	choices, err := mapOf(c.Fields[1], "choices")
	if err != nil {
		return nil, at("choices", err)
	}
	st.Choices = make([]ChoiceEntry, len(choices))
	for i, p := range choices {
		e := &st.Choices[i]
		if e.Choice, err = ChoiceIDFromData(p.Key); err != nil {
			return nil, at("choices", atIndex(i, atIndex(0, err)))
		}
		if e.Value, err = intOf(p.Value, "chosen number"); err != nil {
			return nil, at("choices", atIndex(i, atIndex(1, err)))
		}
	}
	bound, err := mapOf(c.Fields[2], "boundValues")
	if err != nil {
		return nil, at("boundValues", err)
	}
	st.BoundValues = make([]BoundValueEntry, len(bound))
	for i, p := range bound {
		e := &st.BoundValues[i]
		if e.Name, err = valueIDFromData(p.Key); err != nil {
			return nil, at("boundValues", atIndex(i, atIndex(0, err)))
		}
		if e.Value, err = intOf(p.Value, "bound value"); err != nil {
			return nil, at("boundValues", atIndex(i, atIndex(1, err)))
		}
	}
	if st.MinTime, err = intOf(c.Fields[3], "minTime"); err != nil {
		return nil, at("minTime", err)
	}
	return st, nil
}

// InputContentFromData reads the content of an input.
func InputContentFromData(d pd.Data) (InputContent, error) {
	c, err := constr(d, "InputContent", []int{4, 2, 0})
	if err != nil {
		return nil, err
	}
	f := c.Fields
	switch c.Index {
	case 0:
		in := &IDeposit{}
		if in.IntoAccount, err = PartyFromData(f[0]); err != nil {
			return nil, at("into_account", err)
		}
		if in.From, err = PartyFromData(f[1]); err != nil {
			return nil, at("input_from_party", err)
		}
		if in.Token, err = TokenFromData(f[2]); err != nil {
			return nil, at("of_token", err)
		}
		if in.Amount, err = intOf(f[3], "deposit amount"); err != nil {
			return nil, at("that_deposits", err)
		}
		return in, nil
	case 1:
		in := &IChoice{}
		if in.Choice, err = ChoiceIDFromData(f[0]); err != nil {
			return nil, at("for_choice_id", err)
		}
		if in.ChosenNum, err = intOf(f[1], "chosen number"); err != nil {
			return nil, at("input_that_chooses_num", err)
		}
		return in, nil
	}
	return notifyInput, nil
}

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
	r := make(Redeemer, len(items))
	for i, it := range items {
		if r[i], err = InputFromData(it); err != nil {
			return nil, atIndex(i, err)
		}
	}
	return r, nil
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
