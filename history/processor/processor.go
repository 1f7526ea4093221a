// Package processor turns Marlowe chain events into history records: the
// processor actor between the chain-sync follower and the history store.
// It reads each transaction the classifier recognised (creations, steps
// with their inputs, merkleized continuations and payouts, withdrawals),
// runs the Marlowe semantics for the payouts to addresses, and sends the
// store a history.Step per block or rollback, its records without seqs.
package processor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/handoff"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// Stats count what the processor saw besides records.
type Stats struct {
	RejectedOutputs   uint64 // outputs to Marlowe validators that cannot be followed
	DecodeFailures    uint64 // blocks or transactions that could not be decoded
	UndecodableBlocks uint64
}

// Processor turns Marlowe chain events into history records. As an actor it
// receives *handoff.ChainEvent and sends *history.Step to the store.
// Between events it keeps nothing but its counters, which outlive its
// incarnations (the metrics read them): each incarnation Props spawns is a
// fresh actor.
type Processor struct {
	slots chain.SlotConfig
	log   *zap.Logger
	store *actor.PID
	stats Stats
	// rejected counts (by reason) and logs once the outputs that cannot
	// be followed (rejected.go).
	rejected rejectedOutputs
}

// New returns a processor for a network's slot configuration that sends
// its steps to store.
func New(slots chain.SlotConfig, logger *zap.Logger, store *actor.PID) *Processor {
	return &Processor{slots: slots, log: logger.Named("history.processor"), store: store}
}

// Props returns the actor's props: it sends its steps to the store given
// to NewProcessor.
func (p *Processor) Props() *actor.Props { return p.PropsTo(p.store) }

// PropsTo returns the props of a processor actor that sends its steps to
// store.
func (p *Processor) PropsTo(store *actor.PID) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &incarnation{Processor: p, store: store} })
}

// incarnation is one incarnation of the processor actor.
type incarnation struct {
	*Processor
	store *actor.PID
}

// Receive handles the actor's messages.
func (p *incarnation) Receive(ctx actor.Context) {
	if ev, ok := ctx.Message().(*handoff.ChainEvent); ok {
		if st := p.Process(ev.Event); st != nil {
			st.Credit = ev.Credit
			ctx.Send(p.store, st)
		} else {
			handoff.Return(ctx.ActorSystem(), ev.Credit, 1) // nothing to store: done
		}
	}
}

// Process converts one chain event; nil for an event with nothing to store.
// Its records have no seqs: the store gives them theirs.
func (p *Processor) Process(ev classify.Event) *history.Step {
	switch e := ev.(type) {
	case *classify.RollForward:
		return &history.Step{Forward: p.forward(e)}
	case *classify.RollBackward:
		return &history.Step{Rollback: &history.RollbackStep{To: e.Point, Tip: e.Tip, Undone: e.Undone}}
	case *classify.Undecodable:
		p.stats.UndecodableBlocks++
		p.log.Error("a block could not be decoded: it is skipped", zap.Stringer("type", e.Type), zap.Int("bytes", e.Size), zap.String("reason", e.Reason))
	}
	return nil
}

// Stats returns the counters (only safe from the actor's goroutine or in tests).
func (p *Processor) Stats() Stats { return p.stats }

func (p *Processor) forward(e *classify.RollForward) *history.ForwardStep {
	fs := &history.ForwardStep{Header: e.Header, Tip: e.Tip, UTxO: e.Changes}
	for _, f := range e.Failures {
		p.stats.DecodeFailures++
		p.log.Error("undecodable block content", zap.Uint64("slot", e.Header.Slot), zap.Stringer("block", e.Header.Hash),
			zap.Int("tx", f.TxIndex), zap.String("reason", f.Reason))
	}
	for i := range e.Txs {
		tx := &e.Txs[i]
		if !tx.IsValid {
			continue // only its collateral was consumed
		}
		p.transaction(fs, tx)
	}
	return fs
}

func (p *Processor) add(fs *history.ForwardStep, tx *classify.MarloweTx, kind record.Kind, contract chain.TxOutRef, payload any) int {
	js, err := json.Marshal(payload)
	if err != nil {
		// Payloads are built from values that always marshal; a failure is a bug.
		panic(fmt.Sprintf("history processor: marshalling a %s payload: %v", kind, err))
	}
	id := contract
	fs.Records = append(fs.Records, record.Record{Kind: kind, Block: fs.Header, TxID: tx.ID, TxIndex: tx.Index, Contract: &id, Payload: js})
	return len(fs.Records) - 1
}

// transaction adds the records of one valid transaction: steps of contracts
// (in input order), withdrawals, then creations (in output order).
func (p *Processor) transaction(fs *history.ForwardStep, tx *classify.MarloweTx) {
	tags, tagErr := p.tags(tx)
	metadata := MetadataJSON(tx.Metadata)
	for _, ci := range tx.ContractInputs {
		p.step(fs, tx, &ci, tags, metadata)
	}
	p.withdrawals(fs, tx)
	for _, r := range tx.Rejected {
		if r.ContractID == (chain.TxOutRef{}) {
			p.stats.RejectedOutputs++
			p.rejectedOutput(r.Ref, r.Version, r.Reason) // INFO, once per output, and a metric
		}
	}
	for _, c := range tx.Creates {
		if tagErr != nil {
			p.log.Warn("unreadable Marlowe tags", zap.Stringer("tx", tx.ID), zap.Error(tagErr))
		}
		p.create(fs, tx, &c, tags, metadata)
	}
}

func (p *Processor) tags(tx *classify.MarloweTx) (map[string]json.RawMessage, error) {
	if tx.MarloweMetadata == nil {
		return map[string]json.RawMessage{}, nil
	}
	tags, err := ParseMarloweTags(tx.MarloweMetadata)
	if err != nil {
		return map[string]json.RawMessage{}, err
	}
	return tags, nil
}

func (p *Processor) create(fs *history.ForwardStep, tx *classify.MarloweTx, c *classify.ContractOutput, tags, metadata map[string]json.RawMessage) {
	datum, err := c.Data.MarshalJSON()
	if err != nil {
		// The datum decodes but cannot be shown in core JSON (an address
		// party whose hash is not 28 bytes): the contract cannot be served.
		p.stats.RejectedOutputs++
		p.log.Warn("a contract's datum cannot be shown", zap.Stringer("contract", c.Ref), zap.Error(err))
		return
	}
	payload := record.ContractCreated{
		ContractID: c.Ref, Version: c.Version, RolesCurrency: hexString(c.Data.Params.RolesCurrency),
		Address: chain.AddressText(c.Address), Assets: AssetsOf(c.Value), Datum: datum, Tags: tags, Metadata: metadata,
	}
	for _, m := range tx.Mint {
		if m.Quantity > 0 && bytes.Equal(m.Policy[:], c.Data.Params.RolesCurrency) {
			payload.MintedRoles = append(payload.MintedRoles, marlowe.NameText(m.Name))
		}
	}
	ix := p.add(fs, tx, record.KindContractCreated, c.Ref, payload)
	tagNames := make([]string, 0, len(tags))
	for t := range tags {
		tagNames = append(tagNames, t)
	}
	fs.Creations = append(fs.Creations, history.Creation{Record: ix, Contract: record.ContractIndex{
		ID: c.Ref, Version: c.Version, RolesCurrency: c.Data.Params.RolesCurrency, Tags: tagNames,
		Parties: record.PartiesOf(c.Data.Params.RolesCurrency, c.Data.Contract, &c.Data.State), Block: fs.Header,
	}})
}

// step records one contract input: inputs applied, or the reason the step
// cannot be understood.
func (p *Processor) step(fs *history.ForwardStep, tx *classify.MarloweTx, ci *classify.ContractInput, tags, metadata map[string]json.RawMessage) {
	id := ci.UTxO.ContractID
	reject := func(reason string) {
		p.add(fs, tx, record.KindApplyInputsRejected, id, record.ApplyInputsRejected{ContractID: id, Input: ci.UTxO.Ref, Reason: reason})
	}
	var reasons []string
	if len(tx.ContractInputs) > 1 {
		reasons = append(reasons, fmt.Sprintf("the transaction spends %d contract outputs", len(tx.ContractInputs)))
	}
	if ci.RedeemerError != "" {
		reasons = append(reasons, "redeemer: "+ci.RedeemerError)
	}
	for _, r := range tx.Rejected {
		if r.ContractID == id {
			reasons = append(reasons, fmt.Sprintf("output %s: %s", r.Ref, r.Reason))
		}
	}
	if len(reasons) > 0 {
		reject(strings.Join(reasons, "; "))
		return
	}
	inputs := make(marlowe.Redeemer, len(ci.Inputs))
	copy(inputs, ci.Inputs)
	var continuations []marlowe.Contract
	for i := range inputs {
		if !inputs[i].Merkleized() {
			continue
		}
		var h chain.Hash32
		copy(h[:], inputs[i].ContinuationHash)
		raw, ok := tx.Datums[h]
		if !ok || len(inputs[i].ContinuationHash) != 32 {
			reject(fmt.Sprintf("input %d: merkleized continuation %x is not among the transaction's datums", i, inputs[i].ContinuationHash))
			return
		}
		d, err := pd.Decode(raw)
		var cont marlowe.Contract
		if err == nil {
			cont, err = marlowe.ContractFromData(d)
		}
		if err != nil {
			reject(fmt.Sprintf("input %d: merkleized continuation: %v", i, err))
			return
		}
		inputs[i].Continuation = cont
		continuations = append(continuations, cont)
	}
	inputsJSON, err := inputs.MarshalJSON()
	if err != nil {
		reject("inputs cannot be shown: " + err.Error())
		return
	}
	payload := record.InputsApplied{
		ContractID: id, Version: ci.UTxO.Version, Input: ci.UTxO.Ref, Inputs: inputsJSON,
		Interval: SemanticInterval(p.slots, tx.ValidityStart, tx.TTL), Closed: true, Payouts: []record.Payout{},
		Tags: nonEmpty(tags), Metadata: metadata,
	}
	var newParties []record.Party
	for _, c := range tx.Continuations {
		if c.ContractID != id {
			continue
		}
		datum, err := c.Data.MarshalJSON()
		if err != nil {
			reject("the new datum cannot be shown: " + err.Error())
			return
		}
		payload.Output = &record.ContractOutput{Ref: c.Ref, Address: chain.AddressText(c.Address), Assets: AssetsOf(c.Value), Datum: datum}
		payload.Closed = false
		newParties = append(newParties, record.PartiesOf(c.Data.Params.RolesCurrency, c.Data.Contract, &c.Data.State)...)
	}
	var roleOutputs []*classify.PayoutOutput
	for i := range tx.Payouts {
		po := &tx.Payouts[i]
		if po.ContractID != id {
			continue
		}
		ref, role, addr := po.Ref, marlowe.NameText(po.Payout.Role), chain.AddressText(po.Address)
		payload.Payouts = append(payload.Payouts, record.Payout{Ref: &ref, Role: &role, Assets: AssetsOf(po.Value), ValidatorAddress: &addr})
		roleOutputs = append(roleOutputs, po)
	}
	payload.Payouts = p.partyPayouts(tx, ci, inputs, payload.Payouts, roleOutputs)
	ix := p.add(fs, tx, record.KindInputsApplied, id, payload)
	if datum := p.inputDatum(ci); datum != nil {
		for _, c := range continuations {
			newParties = append(newParties, record.PartiesOf(datum.Params.RolesCurrency, c, nil)...)
		}
	}
	if len(newParties) > 0 {
		fs.Additions = append(fs.Additions, history.Addition{Record: ix, Contract: id, Parties: newParties})
	}
}

func nonEmpty(m map[string]json.RawMessage) map[string]json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	return m
}

func (p *Processor) inputDatum(ci *classify.ContractInput) *marlowe.MarloweData {
	if ci.UTxO.Datum == nil {
		return nil
	}
	d, err := pd.Decode(ci.UTxO.Datum)
	if err != nil {
		return nil
	}
	md, err := marlowe.MarloweDataFromData(d)
	if err != nil {
		return nil
	}
	return md
}

// withdrawals records the payouts a transaction withdrew, one record per
// contract in the order of first appearance.
func (p *Processor) withdrawals(fs *history.ForwardStep, tx *classify.MarloweTx) {
	var order []chain.TxOutRef
	byContract := map[chain.TxOutRef][]record.WithdrawnPayout{}
	for _, pi := range tx.PayoutInputs {
		id := pi.UTxO.ContractID
		if _, ok := byContract[id]; !ok {
			order = append(order, id)
		}
		byContract[id] = append(byContract[id], record.WithdrawnPayout{Ref: pi.UTxO.Ref, Role: marlowe.NameText(pi.UTxO.Role)})
	}
	for _, id := range order {
		p.add(fs, tx, record.KindPayoutWithdrawn, id, record.PayoutWithdrawn{ContractID: id, Payouts: byContract[id]})
	}
}
