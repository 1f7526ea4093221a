package chainsync

import (
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
)

// The JSON form of Marlowe chain events, as `marlowe-follower follow`
// prints them: one object per line.

type eventJSON struct {
	Type     string                   `json:"type"`
	Block    *chain.BlockHeader       `json:"block,omitempty"`
	Point    *chain.Point             `json:"point,omitempty"`
	Tip      chain.Tip                `json:"tip"`
	Txs      []txJSON                 `json:"txs,omitempty"`
	Failures []classify.DecodeFailure `json:"failures,omitempty"`
	Reason   string                   `json:"reason,omitempty"`
}

type txJSON struct {
	TxID          chain.Hash32     `json:"txId"`
	Index         int              `json:"index"`
	Valid         bool             `json:"valid"`
	ValidityStart *uint64          `json:"validityStart,omitempty"`
	TTL           *uint64          `json:"invalidHereafter,omitempty"`
	Metadata1564  string           `json:"marloweMetadata,omitempty"`
	Creates       []outputJSON     `json:"creates,omitempty"`
	Applies       []applyJSON      `json:"applies,omitempty"`
	Continuations []outputJSON     `json:"continuations,omitempty"`
	Payouts       []outputJSON     `json:"payouts,omitempty"`
	Withdrawals   []withdrawalJSON `json:"withdrawals,omitempty"`
	Rejected      []rejectedJSON   `json:"rejected,omitempty"`
}

type outputJSON struct {
	Ref        chain.TxOutRef  `json:"output"`
	ContractID chain.TxOutRef  `json:"contractId"`
	Version    string          `json:"version"`
	Address    string          `json:"address"`
	Value      valueJSON       `json:"value"`
	Datum      json.RawMessage `json:"datum,omitempty"`
}

type applyJSON struct {
	ContractID    chain.TxOutRef  `json:"contractId"`
	Input         chain.TxOutRef  `json:"input"`
	Inputs        json.RawMessage `json:"inputs,omitempty"`
	RedeemerError string          `json:"redeemerError,omitempty"`
}

type withdrawalJSON struct {
	Payout     chain.TxOutRef `json:"payoutId"`
	ContractID chain.TxOutRef `json:"contractId"`
}

type rejectedJSON struct {
	Ref        chain.TxOutRef  `json:"output"`
	ContractID *chain.TxOutRef `json:"contractId,omitempty"`
	Version    string          `json:"version"`
	Reason     string          `json:"reason"`
}

type valueJSON struct {
	Lovelace uint64            `json:"lovelace"`
	Tokens   map[string]string `json:"tokens,omitempty"` // policy.namehex -> quantity
}

func toValueJSON(v block.Value) valueJSON {
	out := valueJSON{Lovelace: v.Lovelace}
	for _, a := range v.Assets {
		if out.Tokens == nil {
			out.Tokens = map[string]string{}
		}
		out.Tokens[a.Policy.String()+"."+hex.EncodeToString(a.Name)] = strconv.FormatUint(a.Quantity, 10)
	}
	return out
}

// AddressText shows an address; see chain.AddressText.
func AddressText(raw []byte) string { return chain.AddressText(raw) }

// MarshalEvent returns the JSON of an event.
func MarshalEvent(ev classify.Event) ([]byte, error) {
	switch e := ev.(type) {
	case *classify.RollForward:
		out := eventJSON{Type: "rollForward", Block: &e.Header, Tip: e.Tip, Failures: e.Failures}
		for i := range e.Txs {
			tj, err := toTxJSON(&e.Txs[i])
			if err != nil {
				return nil, err
			}
			out.Txs = append(out.Txs, tj)
		}
		return json.Marshal(out)
	case *classify.RollBackward:
		return json.Marshal(eventJSON{Type: "rollBackward", Point: &e.Point, Tip: e.Tip})
	case *classify.Undecodable:
		return json.Marshal(eventJSON{Type: "undecodable", Tip: e.Tip, Reason: e.Reason})
	}
	return nil, nil
}

func toTxJSON(tx *classify.MarloweTx) (txJSON, error) {
	out := txJSON{TxID: tx.ID, Index: tx.Index, Valid: tx.IsValid, ValidityStart: tx.ValidityStart, TTL: tx.TTL}
	if tx.MarloweMetadata != nil {
		out.Metadata1564 = hex.EncodeToString(tx.MarloweMetadata)
	}
	contract := func(o classify.ContractOutput) (outputJSON, error) {
		oj := outputJSON{Ref: o.Ref, ContractID: o.ContractID, Version: o.Version, Address: AddressText(o.Address), Value: toValueJSON(o.Value)}
		if o.Data != nil {
			d, err := o.Data.MarshalJSON()
			if err != nil {
				// A datum that decodes but cannot be shown in core JSON
				// (an address party with a short hash): show its CBOR.
				d, _ = json.Marshal(map[string]string{"cbor": hex.EncodeToString(o.Datum)})
			}
			oj.Datum = d
		}
		return oj, nil
	}
	for _, c := range tx.Creates {
		oj, err := contract(c)
		if err != nil {
			return out, err
		}
		out.Creates = append(out.Creates, oj)
	}
	for _, c := range tx.Continuations {
		oj, err := contract(c)
		if err != nil {
			return out, err
		}
		out.Continuations = append(out.Continuations, oj)
	}
	for _, ci := range tx.ContractInputs {
		aj := applyJSON{ContractID: ci.UTxO.ContractID, Input: ci.UTxO.Ref, RedeemerError: ci.RedeemerError}
		if ci.Inputs != nil {
			if js, err := ci.Inputs.MarshalJSON(); err == nil {
				aj.Inputs = js
			}
		}
		out.Applies = append(out.Applies, aj)
	}
	for _, p := range tx.Payouts {
		d, err := p.Payout.MarshalJSON()
		if err != nil {
			return out, err
		}
		out.Payouts = append(out.Payouts, outputJSON{Ref: p.Ref, ContractID: p.ContractID, Version: p.Version,
			Address: AddressText(p.Address), Value: toValueJSON(p.Value), Datum: d})
	}
	for _, p := range tx.PayoutInputs {
		out.Withdrawals = append(out.Withdrawals, withdrawalJSON{Payout: p.UTxO.Ref, ContractID: p.UTxO.ContractID})
	}
	for _, r := range tx.Rejected {
		rj := rejectedJSON{Ref: r.Ref, Version: r.Version, Reason: r.Reason}
		if r.ContractID != (chain.TxOutRef{}) {
			id := r.ContractID
			rj.ContractID = &id
		}
		out.Rejected = append(out.Rejected, rj)
	}
	return out, nil
}
