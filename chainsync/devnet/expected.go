package devnet

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// Kinds of expected Marlowe activity.
const (
	ActivityCreate   = "create"   // a contract was created
	ActivityApply    = "apply"    // inputs were applied to a contract
	ActivityWithdraw = "withdraw" // payouts were withdrawn
	ActivityInvalid  = "invalid"  // a phase-2-invalid transaction touched a contract
	ActivityRejected = "rejected" // an output to a Marlowe validator cannot be followed
)

// Activity is one piece of Marlowe activity the generator put on chain, in a
// form the follower's classification can be compared with.
type Activity struct {
	Slot     uint64           `json:"slot"`
	BlockNo  uint64           `json:"blockNo"`
	TxID     chain.Hash32     `json:"txId"`
	Kind     string           `json:"kind"`
	Contract *chain.TxOutRef  `json:"contractId,omitempty"`
	Version  string           `json:"version,omitempty"`
	Inputs   json.RawMessage  `json:"inputs,omitempty"`  // the redeemer's inputs, core JSON
	Output   *chain.TxOutRef  `json:"output,omitempty"`  // the contract's new output; nil when it closed
	Closed   bool             `json:"closed,omitempty"`  // the contract closed
	Payouts  []chain.TxOutRef `json:"payouts,omitempty"` // role payouts made
	// AddressPayouts are the outputs paying address parties; the classifier
	// does not see them (they are ordinary outputs), the history processor
	// finds them with the Marlowe semantics.
	AddressPayouts []chain.TxOutRef  `json:"addressPayouts,omitempty"`
	Spent          []chain.TxOutRef  `json:"spent,omitempty"`    // payouts withdrawn
	Rejected       []chain.TxOutRef  `json:"rejected,omitempty"` // outputs that cannot be followed
	Tags           map[string]string `json:"tags,omitempty"`
}

// ClassifierMismatch compares what a classifier reported (got) with the
// activity the generator put on chain (want), leaving out of want what the
// classifier does not see (the tags and the address payouts), and returns
// an error naming the first difference, or nil. It changes want.
func ClassifierMismatch(got, want []Activity) error {
	for i := range want {
		want[i].Tags, want[i].AddressPayouts = nil, nil
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d activities, generated %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			gj, _ := json.Marshal(got[i])
			wj, _ := json.Marshal(want[i])
			return fmt.Errorf("activity %d:\n got  %s\n want %s", i, gj, wj)
		}
	}
	return nil
}

// WriteActivity writes activities as JSON lines.
func WriteActivity(w io.Writer, acts []Activity) error {
	enc := json.NewEncoder(w)
	for i := range acts {
		if err := enc.Encode(&acts[i]); err != nil {
			return err
		}
	}
	return nil
}

// ActivityOf turns a classified block into activities, the way the
// generator describes what it made, so a test can compare them.
func ActivityOf(ev *classify.RollForward) ([]Activity, error) {
	var out []Activity
	for _, tx := range ev.Txs {
		base := Activity{Slot: ev.Header.Slot, BlockNo: ev.Header.BlockNo, TxID: tx.ID}
		if !tx.IsValid {
			a := base
			a.Kind = ActivityInvalid
			for _, ci := range tx.ContractInputs {
				id := ci.UTxO.ContractID
				a.Contract = &id
			}
			out = append(out, a)
			continue
		}
		for _, c := range tx.Creates {
			a := base
			a.Kind = ActivityCreate
			id := c.ContractID
			a.Contract, a.Version = &id, c.Version
			out = append(out, a)
		}
		if len(tx.ContractInputs) == 1 {
			ci := tx.ContractInputs[0]
			a := base
			a.Kind = ActivityApply
			id := ci.UTxO.ContractID
			a.Contract, a.Version = &id, ci.UTxO.Version
			if ci.RedeemerError != "" {
				return nil, fmt.Errorf("tx %s: redeemer: %s", tx.ID, ci.RedeemerError)
			}
			js, err := ci.Inputs.MarshalJSON()
			if err != nil {
				return nil, err
			}
			a.Inputs = js
			a.Closed = true
			for _, cont := range tx.Continuations {
				ref := cont.Ref
				a.Output, a.Closed = &ref, false
			}
			for _, r := range tx.Rejected {
				if r.ContractID == id && r.Role == marlowe.RoleSemantics {
					ref := r.Ref
					a.Output, a.Closed = &ref, false
				}
			}
			for _, p := range tx.Payouts {
				a.Payouts = append(a.Payouts, p.Ref)
			}
			out = append(out, a)
		}
		if len(tx.PayoutInputs) > 0 {
			a := base
			a.Kind = ActivityWithdraw
			for _, p := range tx.PayoutInputs {
				a.Spent = append(a.Spent, p.UTxO.Ref)
			}
			slices.SortFunc(a.Spent, chain.TxOutRef.Compare)
			out = append(out, a)
		}
		var rejected []chain.TxOutRef
		for _, r := range tx.Rejected {
			if r.ContractID == (chain.TxOutRef{}) {
				rejected = append(rejected, r.Ref)
			}
		}
		if len(rejected) > 0 {
			a := base
			a.Kind = ActivityRejected
			a.Rejected = rejected
			out = append(out, a)
		}
	}
	return out, nil
}
