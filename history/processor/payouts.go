package processor

import (
	"bytes"
	"encoding/json"
	"math/big"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/record"
)

// partyPayouts adds the payments of a step to parties to its payouts. The
// role payouts are the outputs to the payout validator (rolePayouts, one per
// roleOutputs); address payouts are ordinary outputs, so they are found
// with the Marlowe semantics, computed from the spent datum and the inputs.
// Each payment is attributed to the output carrying it (attribute): a
// payout is one output, its assets the output's, listing the payments it
// carries. It returns the role payouts, the address payouts in output
// order, then the payments no output carries, as payouts without an id.
func (p *Processor) partyPayouts(tx *classify.MarloweTx, ci *classify.ContractInput, inputs marlowe.Redeemer,
	rolePayouts []record.Payout, roleOutputs []*classify.PayoutOutput) []record.Payout {
	md := p.inputDatum(ci)
	iv := SemanticInterval(p.slots, tx.ValidityStart, tx.TTL)
	if md == nil || iv.FromMillis == nil || iv.ToMillis == nil {
		return rolePayouts
	}
	out, err := marlowe.ComputeTransaction(marlowe.TransactionInput{
		Interval: marlowe.TimeInterval{From: big.NewInt(*iv.FromMillis), To: big.NewInt(*iv.ToMillis)},
		Inputs:   inputs,
	}, md.State, md.Contract)
	if err != nil {
		p.log.Warn("the semantics do not accept a step the chain accepted; its address payouts are not shown",
			zap.Stringer("tx", tx.ID), zap.Stringer("contract", ci.UTxO.ContractID), zap.Error(err))
		return rolePayouts
	}
	set := &payoutSet{tx: tx, roles: rolePayouts, byOutput: map[int]*record.Payout{}}
	marloweOuts := marloweOutputs(tx)
	for _, pe := range payeesOf(out.Payments) {
		outs, holdings := pe.candidates(tx, md, roleOutputs, marloweOuts)
		shares := make([]share, len(pe.pays))
		for i, pay := range pe.pays {
			shares[i] = shareOf(pay)
		}
		set.place(pe, outs, attribute(shares, holdings))
	}
	return set.list()
}

// payee is the semantics' payments of a step to one party: a role or an
// address.
type payee struct {
	role    []byte // or
	addr    []byte // the address, raw
	text    string // the address, bech32
	pays    []*marlowe.Payment
	entries []record.Payment
}

// payeesOf groups the payments to parties by payee, in the order of each
// payee's first payment.
func payeesOf(payments []marlowe.Payment) []*payee {
	var payees []*payee
	byKey := map[string]*payee{}
	for i := range payments {
		pay := &payments[i]
		if pay.To.Kind != marlowe.PayeeParty {
			continue
		}
		var key string
		pe := &payee{}
		if a := pay.To.Party.Address; a != nil {
			text, err := a.Bech32()
			if err != nil {
				continue
			}
			raw, _ := a.Bytes()
			key, pe.addr, pe.text = "a"+string(raw), raw, text
		} else {
			key, pe.role = "r"+string(pay.To.Party.Role), pay.To.Party.Role
		}
		if byKey[key] == nil {
			byKey[key] = pe
			payees = append(payees, pe)
		}
		pe = byKey[key]
		entry := record.Payment{Assets: paymentAssets(pay.Token, pay.Amount)}
		if from, err := pay.From.MarshalJSON(); err == nil {
			entry.From = from
		}
		pe.pays, pe.entries = append(pe.pays, pay), append(pe.entries, entry)
	}
	return payees
}

// marloweOutputs returns the indexes of the outputs that are the Marlowe
// validators' (no party's).
func marloweOutputs(tx *classify.MarloweTx) map[uint32]bool {
	outs := map[uint32]bool{}
	for _, c := range tx.Continuations {
		outs[c.Ref.Index] = true
	}
	for _, c := range tx.Creates {
		outs[c.Ref.Index] = true
	}
	for _, po := range tx.Payouts {
		outs[po.Ref.Index] = true
	}
	for _, r := range tx.Rejected {
		outs[r.Ref.Index] = true
	}
	return outs
}

// candidates returns the outputs that may carry the payee's payments and
// what each holds: for a role, positions in roleOutputs (those of its
// role and roles currency); for an address, indexes in tx.Outputs (the
// ordinary outputs to it).
func (pe *payee) candidates(tx *classify.MarloweTx, md *marlowe.MarloweData, roleOutputs []*classify.PayoutOutput,
	marloweOuts map[uint32]bool) (outs []int, holdings []holding) {
	if pe.addr == nil {
		for k, po := range roleOutputs {
			if bytes.Equal(po.Payout.Role, pe.role) && bytes.Equal(po.Payout.RolesCurrency, md.Params.RolesCurrency) {
				outs, holdings = append(outs, k), append(holdings, holdingOf(po.Value))
			}
		}
		return outs, holdings
	}
	for k := range tx.Outputs {
		if o := &tx.Outputs[k]; !marloweOuts[uint32(k)] && bytes.Equal(o.Address, pe.addr) {
			outs, holdings = append(outs, k), append(holdings, holdingOf(o.Value))
		}
	}
	return outs, holdings
}

// payoutSet collects a step's payouts as payments are attributed to them.
type payoutSet struct {
	tx       *classify.MarloweTx
	roles    []record.Payout        // one per role output
	byOutput map[int]*record.Payout // address payouts, by output index
	unpaid   []record.Payout        // payments no output carries
}

// place adds a payee's payments where the attribution put them (an index
// in outs, or -1: carried by no output).
func (s *payoutSet) place(pe *payee, outs []int, attribution []int) {
	for i, o := range attribution {
		entry := pe.entries[i]
		switch {
		case o < 0:
			po := record.Payout{Assets: entry.Assets, Payments: []record.Payment{entry}}
			if pe.addr == nil {
				role := marlowe.NameText(pe.role)
				po.Role = &role
			} else {
				text := pe.text
				po.Address = &text
			}
			s.unpaid = append(s.unpaid, po)
		case pe.addr == nil:
			rp := &s.roles[outs[o]]
			rp.Payments = append(rp.Payments, entry)
		default:
			k := outs[o]
			po := s.byOutput[k]
			if po == nil {
				ref, text := chain.TxOutRef{TxID: s.tx.ID, Index: uint32(k)}, pe.text
				po = &record.Payout{Ref: &ref, Address: &text, Assets: AssetsOf(s.tx.Outputs[k].Value)}
				s.byOutput[k] = po
			}
			po.Payments = append(po.Payments, entry)
		}
	}
}

// list returns the role payouts, the address payouts in output order, then
// the unpaid ones.
func (s *payoutSet) list() []record.Payout {
	payouts := s.roles
	for k := range s.tx.Outputs {
		if po := s.byOutput[k]; po != nil {
			payouts = append(payouts, *po)
		}
	}
	return append(payouts, s.unpaid...)
}

// paymentAssets shows a payment of amount of token.
func paymentAssets(t marlowe.Token, amount *big.Int) record.Assets {
	a := record.Assets{Tokens: map[string]map[string]json.Number{}}
	if len(t.Currency) == 0 {
		if amount.IsUint64() {
			a.Lovelace = amount.Uint64()
		}
		return a
	}
	a.Tokens[hexString(t.Currency)] = map[string]json.Number{marlowe.NameText(t.Name): json.Number(amount.String())}
	return a
}
