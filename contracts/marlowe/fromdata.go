package marlowe

import (
	"math/big"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// The functions in this file and fromdata_state.go read the Plutus Data
// form of every Marlowe type (shared/design/MARLOWE.md section 2): here the
// language, there the datum, the state and the inputs. They are strict: a
// wrong constructor index, a wrong number of fields or a wrong kind of
// value is an error that names the path where it was found.

func kindName(d pd.Data) string {
	switch d.(type) {
	case *pd.Constr:
		return "a constructor"
	case *pd.Map:
		return "a map"
	case *pd.List:
		return "a list"
	case *pd.Integer:
		return "an integer"
	case *pd.Bytes:
		return "a byte string"
	}
	return "nothing"
}

// constr checks that d is a constructor of type what with one of the allowed
// indexes and the number of fields that index takes (arity[index]).
func constr(d pd.Data, what string, arity []int) (*pd.Constr, error) {
	c, ok := d.(*pd.Constr)
	if !ok {
		return nil, shapeError("%s: expected a constructor, found %s", what, kindName(d))
	}
	if c.Index >= uint64(len(arity)) {
		return nil, shapeError("unknown %s constructor %d", what, c.Index)
	}
	if want := arity[c.Index]; len(c.Fields) != want {
		return nil, shapeError("%s constructor %d takes %d fields, found %d", what, c.Index, want, len(c.Fields))
	}
	return c, nil
}

func bytesOf(d pd.Data, what string) ([]byte, error) {
	b, ok := d.(*pd.Bytes)
	if !ok {
		return nil, shapeError("%s: expected a byte string, found %s", what, kindName(d))
	}
	return b.B, nil
}

func intOf(d pd.Data, what string) (*big.Int, error) {
	i, ok := d.(*pd.Integer)
	if !ok {
		return nil, shapeError("%s: expected an integer, found %s", what, kindName(d))
	}
	return i.Big(), nil
}

func listOf(d pd.Data, what string) ([]pd.Data, error) {
	l, ok := d.(*pd.List)
	if !ok {
		return nil, shapeError("%s: expected a list, found %s", what, kindName(d))
	}
	return l.Items, nil
}

func mapOf(d pd.Data, what string) ([]pd.Pair, error) {
	m, ok := d.(*pd.Map)
	if !ok {
		return nil, shapeError("%s: expected a map, found %s", what, kindName(d))
	}
	return m.Pairs, nil
}

// PartyFromData reads a party.
func PartyFromData(d pd.Data) (Party, error) {
	c, err := constr(d, "Party", []int{2, 1})
	if err != nil {
		return Party{}, err
	}
	if c.Index == 1 {
		role, err := bytesOf(c.Fields[0], "role name")
		if err != nil {
			return Party{}, at("role_token", err)
		}
		return Party{Role: role}, nil
	}
	nc, err := constr(c.Fields[0], "Network", []int{0, 0})
	if err != nil {
		return Party{}, at("address", at("network", err))
	}
	addr, err := AddressFromData(c.Fields[1])
	if err != nil {
		return Party{}, at("address", err)
	}
	return Party{Address: &PartyAddress{Network: Network(nc.Index), Address: addr}}, nil
}

// AddressFromData reads a Plutus address.
func AddressFromData(d pd.Data) (Address, error) {
	c, err := constr(d, "Address", []int{2})
	if err != nil {
		return Address{}, err
	}
	pay, err := credentialFromData(c.Fields[0])
	if err != nil {
		return Address{}, at("credential", err)
	}
	mc, err := constr(c.Fields[1], "Maybe StakingCredential", []int{1, 0})
	if err != nil {
		return Address{}, at("staking", err)
	}
	addr := Address{Payment: pay}
	if mc.Index == 1 {
		return addr, nil
	}
	sc, err := constr(mc.Fields[0], "StakingCredential", []int{1, 3})
	if err != nil {
		return Address{}, at("staking", err)
	}
	if sc.Index == 0 {
		cred, err := credentialFromData(sc.Fields[0])
		if err != nil {
			return Address{}, at("staking", err)
		}
		addr.Staking = &StakingCredential{Hash: cred}
		return addr, nil
	}
	ptr := &StakePointer{}
	for i, dst := range []**big.Int{&ptr.Slot, &ptr.TxIndex, &ptr.CertIndex} {
		if *dst, err = intOf(sc.Fields[i], "stake pointer"); err != nil {
			return Address{}, at("staking", atIndex(i, err))
		}
	}
	addr.Staking = &StakingCredential{Pointer: ptr}
	return addr, nil
}

func credentialFromData(d pd.Data) (Credential, error) {
	c, err := constr(d, "Credential", []int{1, 1})
	if err != nil {
		return Credential{}, err
	}
	h, err := bytesOf(c.Fields[0], "credential hash")
	if err != nil {
		return Credential{}, err
	}
	return Credential{Kind: CredentialKind(c.Index), Hash: h}, nil
}

// TokenFromData reads a token.
func TokenFromData(d pd.Data) (Token, error) {
	c, err := constr(d, "Token", []int{2})
	if err != nil {
		return Token{}, err
	}
	cur, err := bytesOf(c.Fields[0], "currency symbol")
	if err != nil {
		return Token{}, at("currency_symbol", err)
	}
	name, err := bytesOf(c.Fields[1], "token name")
	if err != nil {
		return Token{}, at("token_name", err)
	}
	return Token{Currency: cur, Name: name}, nil
}

// ChoiceIDFromData reads a choice id.
func ChoiceIDFromData(d pd.Data) (ChoiceID, error) {
	c, err := constr(d, "ChoiceId", []int{2})
	if err != nil {
		return ChoiceID{}, err
	}
	name, err := bytesOf(c.Fields[0], "choice name")
	if err != nil {
		return ChoiceID{}, at("choice_name", err)
	}
	owner, err := PartyFromData(c.Fields[1])
	if err != nil {
		return ChoiceID{}, at("choice_owner", err)
	}
	return ChoiceID{Name: name, Owner: owner}, nil
}

func valueIDFromData(d pd.Data) (ValueID, error) {
	c, err := constr(d, "ValueId", []int{1})
	if err != nil {
		return ValueID{}, err
	}
	name, err := bytesOf(c.Fields[0], "value name")
	if err != nil {
		return ValueID{}, err
	}
	return ValueID{Name: name}, nil
}

func payeeFromData(d pd.Data) (Payee, error) {
	c, err := constr(d, "Payee", []int{1, 1})
	if err != nil {
		return Payee{}, err
	}
	p, err := PartyFromData(c.Fields[0])
	if err != nil {
		if c.Index == 0 {
			return Payee{}, at("account", err)
		}
		return Payee{}, at("party", err)
	}
	return Payee{Kind: PayeeKind(c.Index), Party: p}, nil
}

// contractArity lists the fields of each Contract constructor.
var contractArity = []int{0, 5, 3, 3, 3, 2}

// ContractFromData reads a contract.
func ContractFromData(d pd.Data) (Contract, error) {
	c, err := constr(d, "Contract", contractArity)
	if err != nil {
		return nil, err
	}
	f := c.Fields
	switch c.Index {
	case 0:
		return closeContract, nil
	case 1:
		p := &Pay{}
		if p.From, err = PartyFromData(f[0]); err != nil {
			return nil, at("from_account", err)
		}
		if p.To, err = payeeFromData(f[1]); err != nil {
			return nil, at("to", err)
		}
		if p.Token, err = TokenFromData(f[2]); err != nil {
			return nil, at("token", err)
		}
		if p.Value, err = ValueFromData(f[3]); err != nil {
			return nil, at("pay", err)
		}
		if p.Then, err = ContractFromData(f[4]); err != nil {
			return nil, at("then", err)
		}
		return p, nil
	case 2:
		n := &If{}
		if n.Observation, err = ObservationFromData(f[0]); err != nil {
			return nil, at("if", err)
		}
		if n.Then, err = ContractFromData(f[1]); err != nil {
			return nil, at("then", err)
		}
		if n.Else, err = ContractFromData(f[2]); err != nil {
			return nil, at("else", err)
		}
		return n, nil
	case 3:
		w := &When{}
		cases, err := listOf(f[0], "cases")
		if err != nil {
			return nil, at("when", err)
		}
		w.Cases = make([]Case, len(cases))
		for i, cd := range cases {
			if err := caseFromData(cd, &w.Cases[i]); err != nil {
				return nil, at("when", atIndex(i, err))
			}
		}
		if w.Timeout, err = intOf(f[1], "timeout"); err != nil {
			return nil, at("timeout", err)
		}
		if w.TimeoutContinuation, err = ContractFromData(f[2]); err != nil {
			return nil, at("timeout_continuation", err)
		}
		return w, nil
	case 4:
		l := &Let{}
		if l.Name, err = valueIDFromData(f[0]); err != nil {
			return nil, at("let", err)
		}
		if l.Value, err = ValueFromData(f[1]); err != nil {
			return nil, at("be", err)
		}
		if l.Then, err = ContractFromData(f[2]); err != nil {
			return nil, at("then", err)
		}
		return l, nil
	default:
		a := &Assert{}
		if a.Observation, err = ObservationFromData(f[0]); err != nil {
			return nil, at("assert", err)
		}
		if a.Then, err = ContractFromData(f[1]); err != nil {
			return nil, at("then", err)
		}
		return a, nil
	}
}

func caseFromData(d pd.Data, out *Case) error {
	c, err := constr(d, "Case", []int{2, 2})
	if err != nil {
		return err
	}
	if out.Action, err = ActionFromData(c.Fields[0]); err != nil {
		return at("case", err)
	}
	if c.Index == 0 {
		if out.Then, err = ContractFromData(c.Fields[1]); err != nil {
			return at("then", err)
		}
		return nil
	}
	if out.MerkleizedThen, err = bytesOf(c.Fields[1], "continuation hash"); err != nil {
		return at("merkleized_then", err)
	}
	return nil
}

// ActionFromData reads an action.
func ActionFromData(d pd.Data) (Action, error) {
	c, err := constr(d, "Action", []int{4, 2, 1})
	if err != nil {
		return nil, err
	}
	f := c.Fields
	switch c.Index {
	case 0:
		a := &Deposit{}
		if a.IntoAccount, err = PartyFromData(f[0]); err != nil {
			return nil, at("into_account", err)
		}
		if a.From, err = PartyFromData(f[1]); err != nil {
			return nil, at("party", err)
		}
		if a.Token, err = TokenFromData(f[2]); err != nil {
			return nil, at("of_token", err)
		}
		if a.Amount, err = ValueFromData(f[3]); err != nil {
			return nil, at("deposits", err)
		}
		return a, nil
	case 1:
		a := &Choice{}
		if a.Choice, err = ChoiceIDFromData(f[0]); err != nil {
			return nil, at("for_choice", err)
		}
		bounds, err := listOf(f[1], "bounds")
		if err != nil {
			return nil, at("choose_between", err)
		}
		a.Bounds = make([]Bound, len(bounds))
		for i, bd := range bounds {
			bc, err := constr(bd, "Bound", []int{2})
			if err != nil {
				return nil, at("choose_between", atIndex(i, err))
			}
			if a.Bounds[i].From, err = intOf(bc.Fields[0], "bound"); err != nil {
				return nil, at("choose_between", atIndex(i, at("from", err)))
			}
			if a.Bounds[i].To, err = intOf(bc.Fields[1], "bound"); err != nil {
				return nil, at("choose_between", atIndex(i, at("to", err)))
			}
		}
		return a, nil
	default:
		o, err := ObservationFromData(f[0])
		if err != nil {
			return nil, at("notify_if", err)
		}
		return &Notify{Observation: o}, nil
	}
}

var valueArity = []int{2, 1, 1, 2, 2, 2, 2, 1, 0, 0, 1, 3}

// ValueFromData reads a value.
func ValueFromData(d pd.Data) (Value, error) {
	c, err := constr(d, "Value", valueArity)
	if err != nil {
		return nil, err
	}
	f := c.Fields
	switch c.Index {
	case 0:
		v := &AvailableMoney{}
		if v.Account, err = PartyFromData(f[0]); err != nil {
			return nil, at("in_account", err)
		}
		if v.Token, err = TokenFromData(f[1]); err != nil {
			return nil, at("amount_of_token", err)
		}
		return v, nil
	case 1:
		n, err := intOf(f[0], "constant")
		if err != nil {
			return nil, err
		}
		return &Constant{N: n}, nil
	case 2:
		v, err := ValueFromData(f[0])
		if err != nil {
			return nil, at("negate", err)
		}
		return &NegValue{Value: v}, nil
	case 3, 4, 5, 6:
		keys := binaryValueKeys[c.Index]
		l, err := ValueFromData(f[0])
		if err != nil {
			return nil, at(keys[0], err)
		}
		r, err := ValueFromData(f[1])
		if err != nil {
			return nil, at(keys[1], err)
		}
		switch c.Index {
		case 3:
			return &AddValue{Left: l, Right: r}, nil
		case 4:
			return &SubValue{Left: l, Right: r}, nil
		case 5:
			return &MulValue{Left: l, Right: r}, nil
		}
		return &DivValue{Left: l, Right: r}, nil
	case 7:
		ch, err := ChoiceIDFromData(f[0])
		if err != nil {
			return nil, at("value_of_choice", err)
		}
		return &ChoiceValue{Choice: ch}, nil
	case 8:
		return timeStart, nil
	case 9:
		return timeEnd, nil
	case 10:
		id, err := valueIDFromData(f[0])
		if err != nil {
			return nil, at("use_value", err)
		}
		return &UseValue{Name: id}, nil
	default:
		v := &Cond{}
		if v.Observation, err = ObservationFromData(f[0]); err != nil {
			return nil, at("if", err)
		}
		if v.Then, err = ValueFromData(f[1]); err != nil {
			return nil, at("then", err)
		}
		if v.Else, err = ValueFromData(f[2]); err != nil {
			return nil, at("else", err)
		}
		return v, nil
	}
}

// binaryValueKeys are the JSON keys of the operands of the binary values, by
// constructor index.
var binaryValueKeys = map[uint64][2]string{
	3: {"add", "and"},
	4: {"value", "minus"},
	5: {"multiply", "times"},
	6: {"divide", "by"},
}

var observationArity = []int{2, 2, 1, 1, 2, 2, 2, 2, 2, 0, 0}

// observationKeys are the JSON keys of the operands of the binary
// observations, by constructor index.
var observationKeys = map[uint64][2]string{
	0: {"both", "and"},
	1: {"either", "or"},
	4: {"value", "ge_than"},
	5: {"value", "gt"},
	6: {"value", "lt"},
	7: {"value", "le_than"},
	8: {"value", "equal_to"},
}

// ObservationFromData reads an observation.
func ObservationFromData(d pd.Data) (Observation, error) {
	c, err := constr(d, "Observation", observationArity)
	if err != nil {
		return nil, err
	}
	f := c.Fields
	switch c.Index {
	case 0, 1:
		keys := observationKeys[c.Index]
		l, err := ObservationFromData(f[0])
		if err != nil {
			return nil, at(keys[0], err)
		}
		r, err := ObservationFromData(f[1])
		if err != nil {
			return nil, at(keys[1], err)
		}
		if c.Index == 0 {
			return &AndObs{Left: l, Right: r}, nil
		}
		return &OrObs{Left: l, Right: r}, nil
	case 2:
		o, err := ObservationFromData(f[0])
		if err != nil {
			return nil, at("not", err)
		}
		return &NotObs{Observation: o}, nil
	case 3:
		ch, err := ChoiceIDFromData(f[0])
		if err != nil {
			return nil, at("chose_something_for", err)
		}
		return &ChoseSomething{Choice: ch}, nil
	case 9:
		return trueObservation, nil
	case 10:
		return falseObservation, nil
	default:
		keys := observationKeys[c.Index]
		l, err := ValueFromData(f[0])
		if err != nil {
			return nil, at(keys[0], err)
		}
		r, err := ValueFromData(f[1])
		if err != nil {
			return nil, at(keys[1], err)
		}
		switch c.Index {
		case 4:
			return &ValueGE{Left: l, Right: r}, nil
		case 5:
			return &ValueGT{Left: l, Right: r}, nil
		case 6:
			return &ValueLT{Left: l, Right: r}, nil
		case 7:
			return &ValueLE{Left: l, Right: r}, nil
		}
		return &ValueEQ{Left: l, Right: r}, nil
	}
}
