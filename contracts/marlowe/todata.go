package marlowe

import (
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
func ContractToData(ct Contract) pd.Data { return contractSum.toData(ct) }

// ToData returns the Plutus Data of a case.
func (cs *Case) ToData() pd.Data {
	if cs.Merkleized() {
		return c(1, ActionToData(cs.Action), b(cs.MerkleizedThen))
	}
	return c(0, ActionToData(cs.Action), ContractToData(cs.Then))
}

// ActionToData returns the Plutus Data of an action.
func ActionToData(a Action) pd.Data { return actionSum.toData(a) }

// ValueToData returns the Plutus Data of a value.
func ValueToData(v Value) pd.Data { return valueSum.toData(v) }

// ObservationToData returns the Plutus Data of an observation.
func ObservationToData(o Observation) pd.Data { return observationSum.toData(o) }

// InputContentToData returns the Plutus Data of an input's content.
func InputContentToData(ic InputContent) pd.Data { return inputContentSum.toData(ic) }

// dataList returns the Plutus list of the data of each item.
func dataList[T any](items []T, data func(*T) pd.Data) pd.Data {
	out := make([]pd.Data, len(items))
	for i := range items {
		out[i] = data(&items[i])
	}
	return pd.NewList(out...)
}

func casesToData(cases []Case) pd.Data { return dataList(cases, (*Case).ToData) }

func boundsToData(bounds []Bound) pd.Data { return dataList(bounds, (*Bound).ToData) }

// ToData returns the on-chain (MarloweTxInput) Plutus Data of an input. The
// continuation of a merkleized input is not part of it: it travels as a datum.
func (in *Input) ToData() pd.Data {
	if in.Merkleized() {
		return c(1, InputContentToData(in.Content), b(in.ContinuationHash))
	}
	return c(0, InputContentToData(in.Content))
}

// ToData returns the Plutus Data of a redeemer.
func (r Redeemer) ToData() pd.Data { return dataList(r, (*Input).ToData) }

// ToData returns the Plutus Data of a payout datum.
func (p *PayoutDatum) ToData() pd.Data {
	return c(0, b(p.RolesCurrency), b(p.Role))
}
