package marlowe

import (
	"fmt"
	"math/big"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// The functions in this file write the Plutus Data form of every Marlowe type.
// Together with plutusdata.Encode they give the bytes the Haskell tools write.

func c(index uint64, fields ...pd.Data) pd.Data { return pd.NewConstr(index, fields...) }

func b(v []byte) pd.Data {
	if v == nil {
		v = emptyBytes
	}
	return pd.NewBytes(v)
}

func n(v *big.Int) pd.Data {
	if v == nil {
		return pd.NewInt(0)
	}
	return pd.NewBigInt(v)
}

// ToData returns the Plutus Data of a MarloweData.
func (md *MarloweData) ToData() pd.Data {
	return c(0, c(0, b(md.Params.RolesCurrency)), md.State.ToData(), ContractToData(md.Contract))
}

// ToData returns the Plutus Data of a state.
func (st *State) ToData() pd.Data {
	accounts := make([]pd.Pair, len(st.Accounts))
	for i, e := range st.Accounts {
		accounts[i] = pd.Pair{Key: c(0, e.Party.ToData(), e.Token.ToData()), Value: n(e.Amount)}
	}
	choices := make([]pd.Pair, len(st.Choices))
	for i, e := range st.Choices {
		choices[i] = pd.Pair{Key: e.Choice.ToData(), Value: n(e.Value)}
	}
	bound := make([]pd.Pair, len(st.BoundValues))
	for i, e := range st.BoundValues {
		bound[i] = pd.Pair{Key: e.Name.ToData(), Value: n(e.Value)}
	}
	return c(0, pd.NewMap(accounts...), pd.NewMap(choices...), pd.NewMap(bound...), n(st.MinTime))
}

// ToData returns the Plutus Data of a party.
func (p Party) ToData() pd.Data {
	if p.Address == nil {
		return c(1, b(p.Role))
	}
	return c(0, c(uint64(p.Address.Network)), p.Address.Address.ToData())
}

// ToData returns the Plutus Data of an address.
func (a Address) ToData() pd.Data {
	staking := c(1)
	if s := a.Staking; s != nil {
		if s.Pointer != nil {
			staking = c(0, c(1, n(s.Pointer.Slot), n(s.Pointer.TxIndex), n(s.Pointer.CertIndex)))
		} else {
			staking = c(0, c(0, s.Hash.ToData()))
		}
	}
	return c(0, a.Payment.ToData(), staking)
}

// ToData returns the Plutus Data of a credential.
func (cr Credential) ToData() pd.Data { return c(uint64(cr.Kind), b(cr.Hash)) }

// ToData returns the Plutus Data of a token.
func (t Token) ToData() pd.Data { return c(0, b(t.Currency), b(t.Name)) }

// ToData returns the Plutus Data of a choice id.
func (ch ChoiceID) ToData() pd.Data { return c(0, b(ch.Name), ch.Owner.ToData()) }

// ToData returns the Plutus Data of a value id.
func (v ValueID) ToData() pd.Data { return c(0, b(v.Name)) }

// ToData returns the Plutus Data of a payee.
func (p Payee) ToData() pd.Data { return c(uint64(p.Kind), p.Party.ToData()) }

// ToData returns the Plutus Data of a bound.
func (bd Bound) ToData() pd.Data { return c(0, n(bd.From), n(bd.To)) }

// ContractToData returns the Plutus Data of a contract.
func ContractToData(ct Contract) pd.Data {
	switch x := ct.(type) {
	case *Close:
		return c(0)
	case *Pay:
		return c(1, x.From.ToData(), x.To.ToData(), x.Token.ToData(), ValueToData(x.Value), ContractToData(x.Then))
	case *If:
		return c(2, ObservationToData(x.Observation), ContractToData(x.Then), ContractToData(x.Else))
	case *When:
		cases := make([]pd.Data, len(x.Cases))
		for i := range x.Cases {
			cases[i] = x.Cases[i].ToData()
		}
		return c(3, pd.NewList(cases...), n(x.Timeout), ContractToData(x.TimeoutContinuation))
	case *Let:
		return c(4, x.Name.ToData(), ValueToData(x.Value), ContractToData(x.Then))
	case *Assert:
		return c(5, ObservationToData(x.Observation), ContractToData(x.Then))
	}
	panic(fmt.Sprintf("marlowe: ContractToData of %T", ct))
}

// ToData returns the Plutus Data of a case.
func (cs *Case) ToData() pd.Data {
	if cs.Merkleized() {
		return c(1, ActionToData(cs.Action), b(cs.MerkleizedThen))
	}
	return c(0, ActionToData(cs.Action), ContractToData(cs.Then))
}

// ActionToData returns the Plutus Data of an action.
func ActionToData(a Action) pd.Data {
	switch x := a.(type) {
	case *Deposit:
		return c(0, x.IntoAccount.ToData(), x.From.ToData(), x.Token.ToData(), ValueToData(x.Amount))
	case *Choice:
		bounds := make([]pd.Data, len(x.Bounds))
		for i, bd := range x.Bounds {
			bounds[i] = bd.ToData()
		}
		return c(1, x.Choice.ToData(), pd.NewList(bounds...))
	case *Notify:
		return c(2, ObservationToData(x.Observation))
	}
	panic(fmt.Sprintf("marlowe: ActionToData of %T", a))
}

// ValueToData returns the Plutus Data of a value.
func ValueToData(v Value) pd.Data {
	switch x := v.(type) {
	case *AvailableMoney:
		return c(0, x.Account.ToData(), x.Token.ToData())
	case *Constant:
		return c(1, n(x.N))
	case *NegValue:
		return c(2, ValueToData(x.Value))
	case *AddValue:
		return c(3, ValueToData(x.Left), ValueToData(x.Right))
	case *SubValue:
		return c(4, ValueToData(x.Left), ValueToData(x.Right))
	case *MulValue:
		return c(5, ValueToData(x.Left), ValueToData(x.Right))
	case *DivValue:
		return c(6, ValueToData(x.Left), ValueToData(x.Right))
	case *ChoiceValue:
		return c(7, x.Choice.ToData())
	case *TimeIntervalStart:
		return c(8)
	case *TimeIntervalEnd:
		return c(9)
	case *UseValue:
		return c(10, x.Name.ToData())
	case *Cond:
		return c(11, ObservationToData(x.Observation), ValueToData(x.Then), ValueToData(x.Else))
	}
	panic(fmt.Sprintf("marlowe: ValueToData of %T", v))
}

// ObservationToData returns the Plutus Data of an observation.
func ObservationToData(o Observation) pd.Data {
	switch x := o.(type) {
	case *AndObs:
		return c(0, ObservationToData(x.Left), ObservationToData(x.Right))
	case *OrObs:
		return c(1, ObservationToData(x.Left), ObservationToData(x.Right))
	case *NotObs:
		return c(2, ObservationToData(x.Observation))
	case *ChoseSomething:
		return c(3, x.Choice.ToData())
	case *ValueGE:
		return c(4, ValueToData(x.Left), ValueToData(x.Right))
	case *ValueGT:
		return c(5, ValueToData(x.Left), ValueToData(x.Right))
	case *ValueLT:
		return c(6, ValueToData(x.Left), ValueToData(x.Right))
	case *ValueLE:
		return c(7, ValueToData(x.Left), ValueToData(x.Right))
	case *ValueEQ:
		return c(8, ValueToData(x.Left), ValueToData(x.Right))
	case *TrueObs:
		return c(9)
	case *FalseObs:
		return c(10)
	}
	panic(fmt.Sprintf("marlowe: ObservationToData of %T", o))
}

// InputContentToData returns the Plutus Data of an input's content.
func InputContentToData(ic InputContent) pd.Data {
	switch x := ic.(type) {
	case *IDeposit:
		return c(0, x.IntoAccount.ToData(), x.From.ToData(), x.Token.ToData(), n(x.Amount))
	case *IChoice:
		return c(1, x.Choice.ToData(), n(x.ChosenNum))
	case *INotify:
		return c(2)
	}
	panic(fmt.Sprintf("marlowe: InputContentToData of %T", ic))
}

// ToData returns the on-chain (MarloweTxInput) Plutus Data of an input. The
// continuation of a merkleized input is not part of it: it travels as a datum.
func (in *Input) ToData() pd.Data {
	if in.Merkleized() {
		return c(1, InputContentToData(in.Content), b(in.ContinuationHash))
	}
	return c(0, InputContentToData(in.Content))
}

// ToData returns the Plutus Data of a redeemer.
func (r Redeemer) ToData() pd.Data {
	items := make([]pd.Data, len(r))
	for i := range r {
		items[i] = r[i].ToData()
	}
	return pd.NewList(items...)
}

// ToData returns the Plutus Data of a payout datum.
func (p *PayoutDatum) ToData() pd.Data {
	return c(0, b(p.RolesCurrency), b(p.Role))
}
