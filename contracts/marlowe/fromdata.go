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

// fields reads the fields of one node in turn. Each call of field or
// fieldOf decodes a field and, when that fails, keeps the error under the
// field's key; once one has failed the later calls decode nothing and built
// returns that first failure, as a chain of checks would.
type fields struct{ err error }

func field[S, T any](fs *fields, src S, key string, dec func(S) (T, error)) T {
	var v T
	if fs.err == nil {
		var err error
		if v, err = dec(src); err != nil {
			fs.err = at(key, err)
		}
	}
	return v
}

// fieldOf is field for the readers of one kind of value (intOf, bytesOf,
// listOf), what naming the field in a shape error.
func fieldOf[T any](fs *fields, d pd.Data, key, what string, of func(pd.Data, string) (T, error)) T {
	var v T
	if fs.err == nil {
		var err error
		if v, err = of(d, what); err != nil {
			fs.err = at(key, err)
		}
	}
	return v
}

// built returns v, or the first failure of its fields.
func built[T any](fs *fields, v T) (T, error) {
	if fs.err != nil {
		var zero T
		return zero, fs.err
	}
	return v, nil
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
	var fs fields
	return built(&fs, Token{
		Currency: fieldOf(&fs, c.Fields[0], "currency_symbol", "currency symbol", bytesOf),
		Name:     fieldOf(&fs, c.Fields[1], "token_name", "token name", bytesOf),
	})
}

// ChoiceIDFromData reads a choice id.
func ChoiceIDFromData(d pd.Data) (ChoiceID, error) {
	c, err := constr(d, "ChoiceId", []int{2})
	if err != nil {
		return ChoiceID{}, err
	}
	var fs fields
	return built(&fs, ChoiceID{
		Name:  fieldOf(&fs, c.Fields[0], "choice_name", "choice name", bytesOf),
		Owner: field(&fs, c.Fields[1], "choice_owner", PartyFromData),
	})
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
	key := "account"
	if c.Index == 1 {
		key = "party"
	}
	var fs fields
	return built(&fs, Payee{Kind: PayeeKind(c.Index), Party: field(&fs, c.Fields[0], key, PartyFromData)})
}

// ContractFromData reads a contract.
func ContractFromData(d pd.Data) (Contract, error) { return contractSum.fromData(d) }

// casesFromData reads the cases of a When.
func casesFromData(d pd.Data) ([]Case, error) {
	items, err := listOf(d, "cases")
	if err != nil {
		return nil, err
	}
	return eachInto(items, caseFromData)
}

func caseFromData(d pd.Data, out *Case) error {
	c, err := constr(d, "Case", []int{2, 2})
	if err != nil {
		return err
	}
	var fs fields
	out.Action = field(&fs, c.Fields[0], "case", ActionFromData)
	if c.Index == 0 {
		out.Then = field(&fs, c.Fields[1], "then", ContractFromData)
	} else {
		out.MerkleizedThen = fieldOf(&fs, c.Fields[1], "merkleized_then", "continuation hash", bytesOf)
	}
	return fs.err
}

// ActionFromData reads an action.
func ActionFromData(d pd.Data) (Action, error) { return actionSum.fromData(d) }

// boundsFromData reads the bounds of a Choice.
func boundsFromData(d pd.Data) ([]Bound, error) {
	items, err := listOf(d, "bounds")
	if err != nil {
		return nil, err
	}
	bounds := make([]Bound, len(items))
	for i, bd := range items {
		bc, err := constr(bd, "Bound", []int{2})
		if err != nil {
			return nil, atIndex(i, err)
		}
		var fs fields
		bounds[i] = Bound{
			From: fieldOf(&fs, bc.Fields[0], "from", "bound", intOf),
			To:   fieldOf(&fs, bc.Fields[1], "to", "bound", intOf),
		}
		if fs.err != nil {
			return nil, atIndex(i, fs.err)
		}
	}
	return bounds, nil
}

// ValueFromData reads a value.
func ValueFromData(d pd.Data) (Value, error) { return valueSum.fromData(d) }

// ObservationFromData reads an observation.
func ObservationFromData(d pd.Data) (Observation, error) { return observationSum.fromData(d) }
