package historytest

import (
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
	"github.com/marlowe-follower/follower/history/record"
)

// SemanticsReport says what CheckSemantics went through.
type SemanticsReport struct {
	Created, Steps, Closed int
	// Rejected are the reasons of the apply_inputs_rejected records.
	Rejected []string
	// FirstMillis and LastMillis are the earliest interval start and the
	// latest interval end of the steps (POSIX ms).
	FirstMillis, LastMillis int64
}

// CheckSemantics replays the Marlowe semantics over a history log: for
// every inputs_applied record of the current chain (records not rolled
// back), oldest first, it computes the transaction from the contract's
// previous datum (its creation's or its previous step's), the recorded
// inputs and the recorded interval, and requires that the semantics accept
// it and give exactly the recorded new datum, or Close when the record says
// the contract closed. It fails on the first step that does not hold. A
// step the chain accepted whose validity interval was turned into POSIX
// time with another network's slot clock fails here.
func CheckSemantics(records []record.Record) (SemanticsReport, error) {
	rep := SemanticsReport{FirstMillis: 1<<63 - 1, LastMillis: -1 << 63}
	datums := map[chain.TxOutRef]*marlowe.MarloweData{}
	for _, r := range records {
		if r.RolledBackBy != nil {
			continue
		}
		switch r.Kind {
		case record.KindContractCreated:
			var p record.ContractCreated
			if err := json.Unmarshal(r.Payload, &p); err != nil {
				return rep, fmt.Errorf("record %d: %w", r.Seq, err)
			}
			md, err := marlowe.ParseMarloweDataJSON(p.Datum)
			if err != nil {
				return rep, fmt.Errorf("record %d: datum: %w", r.Seq, err)
			}
			datums[p.ContractID] = md
			rep.Created++
		case record.KindApplyInputsRejected:
			var p record.ApplyInputsRejected
			if err := json.Unmarshal(r.Payload, &p); err != nil {
				return rep, fmt.Errorf("record %d: %w", r.Seq, err)
			}
			rep.Rejected = append(rep.Rejected, p.Reason)
		case record.KindInputsApplied:
			var p record.InputsApplied
			if err := json.Unmarshal(r.Payload, &p); err != nil {
				return rep, fmt.Errorf("record %d: %w", r.Seq, err)
			}
			md := datums[p.ContractID]
			if md == nil {
				return rep, fmt.Errorf("record %d: contract %s has no datum before this step", r.Seq, p.ContractID)
			}
			iv := p.Interval
			if iv.FromMillis == nil || iv.ToMillis == nil {
				return rep, fmt.Errorf("record %d: open validity interval %+v", r.Seq, iv)
			}
			rep.FirstMillis, rep.LastMillis = min(rep.FirstMillis, *iv.FromMillis), max(rep.LastMillis, *iv.ToMillis)
			inputs, err := marlowe.ParseRedeemerJSON(p.Inputs)
			if err != nil {
				return rep, fmt.Errorf("record %d: inputs: %w", r.Seq, err)
			}
			out, err := marlowe.ComputeTransaction(marlowe.TransactionInput{
				Interval: marlowe.TimeInterval{From: big.NewInt(*iv.FromMillis), To: big.NewInt(*iv.ToMillis)},
				Inputs:   inputs,
			}, md.State, md.Contract)
			if err != nil {
				return rep, fmt.Errorf("record %d (tx %s, contract %s, interval [%d, %d]): the semantics refuse the step: %w",
					r.Seq, r.TxID, p.ContractID, *iv.FromMillis, *iv.ToMillis, err)
			}
			rep.Steps++
			_, closed := out.Contract.(*marlowe.Close)
			if p.Closed {
				if !closed {
					return rep, fmt.Errorf("record %d: closed on chain, the semantics continue", r.Seq)
				}
				rep.Closed++
				delete(datums, p.ContractID)
				continue
			}
			if p.Output == nil {
				return rep, fmt.Errorf("record %d: neither closed nor continuing", r.Seq)
			}
			next, err := marlowe.ParseMarloweDataJSON(p.Output.Datum)
			if err != nil {
				return rep, fmt.Errorf("record %d: new datum: %w", r.Seq, err)
			}
			want := marlowe.MarloweData{Params: md.Params, State: out.State, Contract: out.Contract}
			if !pd.Equal(want.ToData(), next.ToData()) {
				return rep, fmt.Errorf("record %d (tx %s): the new datum is not what the semantics compute", r.Seq, r.TxID)
			}
			datums[p.ContractID] = next
		}
	}
	return rep, nil
}
