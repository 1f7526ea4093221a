package classify

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// MarloweMetadataLabel is the transaction metadata label of Marlowe tags.
const MarloweMetadataLabel = 1564

// DefaultRollbackDepth is how many blocks of UTxO changes are kept for
// rollbacks: the security parameter k of mainnet, preprod and preview.
const DefaultRollbackDepth = 2160

// Options tune a Classifier.
type Options struct {
	// DecodeAll decodes every Alonzo and later block instead of only those
	// the prefilter matches. It exists to check the prefilter, and for
	// benchmarks.
	DecodeAll bool
	// RollbackDepth is how many blocks of UTxO changes are kept; 0 means
	// DefaultRollbackDepth.
	RollbackDepth uint64
	// Block are the options of the block decoder.
	Block block.Options
}

// Stats counts what a classifier has seen.
type Stats struct {
	Blocks         uint64 // blocks rolled forward
	Decoded        uint64 // blocks whose transactions were decoded
	MarloweTxs     uint64 // relevant transactions found
	DecodeFailures uint64 // blocks or transactions that could not be decoded
	Rollbacks      uint64
}

// Classifier turns raw chain events into Marlowe chain events. It is not safe
// for concurrent use: one goroutine (the chain-sync actor) owns it.
type Classifier struct {
	opts      Options
	utxos     *UTxOSet
	prefilter *Prefilter
	stats     Stats
}

// New returns a classifier with an empty UTxO set.
func New(opts Options) *Classifier {
	if opts.RollbackDepth == 0 {
		opts.RollbackDepth = DefaultRollbackDepth
	}
	c := &Classifier{opts: opts, utxos: NewUTxOSet(opts.RollbackDepth), prefilter: NewPrefilter()}
	c.utxos.onTxID = func(id chain.Hash32, delta int) {
		if delta > 0 {
			c.prefilter.AddTxID(id)
		} else {
			c.prefilter.RemoveTxID(id)
		}
	}
	return c
}

// UTxOs returns the tracked output set.
func (c *Classifier) UTxOs() *UTxOSet { return c.utxos }

// Stats returns the counters.
func (c *Classifier) Stats() Stats { return c.stats }

// RollBackward undoes the UTxO changes of the blocks after p.
func (c *Classifier) RollBackward(p chain.Point, tip chain.Tip) (*RollBackward, error) {
	undone, err := c.utxos.RollBack(p)
	if err != nil {
		return nil, err
	}
	c.stats.Rollbacks++
	return &RollBackward{Point: p, Tip: tip, Undone: undone}, nil
}

// Redo re-applies the changes a RollBackward undid, for a rollback that was
// not delivered downstream after all.
func (c *Classifier) Redo(ev *RollBackward) {
	for i := len(ev.Undone) - 1; i >= 0; i-- {
		ch := ev.Undone[i]
		for _, u := range ch.Removed {
			c.utxos.remove(u.Ref)
		}
		for _, u := range ch.Added {
			c.utxos.add(u)
		}
		c.utxos.undo = append(c.utxos.undo, ch)
	}
}

// RollForward classifies one block given as the node sent it: its type and
// raw CBOR. A block whose header cannot be read is an error (it has no point
// to go on with); anything wrong inside the block is reported in Failures.
func (c *Classifier) RollForward(t block.Type, raw []byte, tip chain.Tip) (*RollForward, error) {
	hdr, err := block.DecodeHeader(t, raw, c.opts.Block)
	if err != nil {
		c.stats.DecodeFailures++
		return nil, fmt.Errorf("block header of a %s block: %w", t, err)
	}
	c.stats.Blocks++
	ev := &RollForward{Type: t, Header: hdr.Header, Tip: tip}
	ev.Changes.Block = hdr.Header
	if t.HasPlutus() && (c.opts.DecodeAll || c.prefilter.Match(raw)) {
		c.classifyBlock(t, raw, ev)
	}
	c.utxos.commit(ev.Changes)
	return ev, nil
}

func (c *Classifier) classifyBlock(t block.Type, raw []byte, ev *RollForward) {
	c.stats.Decoded++
	ev.Decoded = true
	b, err := block.DecodeBlock(t, raw, c.opts.Block)
	if err != nil {
		c.stats.DecodeFailures++
		ev.Failures = append(ev.Failures, DecodeFailure{TxIndex: -1, Reason: err.Error()})
		return
	}
	for i := range b.Txs {
		if mt, ok := c.classifyTx(&b.Txs[i], &ev.Changes); ok {
			ev.Txs = append(ev.Txs, mt)
			c.stats.MarloweTxs++
		}
	}
}

// outputScript returns the Marlowe validator an address pays to, by its
// payment credential alone (any stake part).
func outputScript(addr []byte) (*marlowe.ScriptVersion, marlowe.ScriptRole, bool) {
	h, ok := scriptPaymentCredential(addr)
	if !ok {
		return nil, 0, false
	}
	return marlowe.LookupScript(h)
}

// scriptPaymentCredential returns the script hash of a Shelley address whose
// payment credential is a script (header types 1, 3, 5 and 7).
func scriptPaymentCredential(addr []byte) (chain.Hash28, bool) {
	if len(addr) < 29 {
		return chain.Hash28{}, false
	}
	typ := addr[0] >> 4
	if typ > 7 || typ&1 == 0 {
		return chain.Hash28{}, false
	}
	return chain.Hash28(addr[1:29]), true
}

// resolveDatum finds an output's datum: inline, or by hash in the witness set.
func resolveDatum(tx *block.Tx, out *block.TxOut) ([]byte, string) {
	switch {
	case out.InlineDatum != nil:
		return out.InlineDatum, ""
	case out.DatumHash != nil:
		if d, ok := tx.Datums[*out.DatumHash]; ok {
			return d, ""
		}
		return nil, fmt.Sprintf("datum hash %s is not in the transaction's witness set", out.DatumHash)
	}
	return nil, "the output has no datum"
}

func decodeMarloweDatum(raw []byte) (*marlowe.MarloweData, error) {
	return decodeDatum(raw, marlowe.MarloweDataFromData, "MarloweData")
}

func decodePayoutDatum(raw []byte) (*marlowe.PayoutDatum, error) {
	return decodeDatum(raw, marlowe.PayoutDatumFromData, "a payout datum")
}

// decodeDatum reads the Plutus Data in raw as what with fromData.
func decodeDatum[T any](raw []byte, fromData func(pd.Data) (*T, error), what string) (*T, error) {
	d, err := pd.Decode(raw)
	if err != nil {
		return nil, err
	}
	v, err := fromData(d)
	if err != nil {
		return nil, fmt.Errorf("datum is not %s: %w", what, err)
	}
	return v, nil
}

// spendRedeemer finds the spend redeemer of the input at position sorted in
// the sorted input set.
func spendRedeemer(tx *block.Tx, sorted int) []byte {
	for _, r := range tx.Redeemers {
		if r.Tag == block.RedeemerSpend && int(r.Index) == sorted {
			return r.Data
		}
	}
	return nil
}

// classifyTx classifies one transaction and applies its effects to the UTxO
// set, recording them in changes. It reports whether the transaction is
// Marlowe-relevant.
func (c *Classifier) classifyTx(tx *block.Tx, changes *UTxOChanges) (MarloweTx, bool) {
	mt := MarloweTx{ID: tx.ID, Index: tx.Index, IsValid: tx.IsValid, ValidityStart: tx.ValidityStart, TTL: tx.TTL}

	sorted := tx.SortedInputs() // the ledger's order, duplicates removed
	for _, in := range sorted {
		u, ok := c.utxos.Get(in)
		if !ok {
			continue
		}
		if u.Kind == KindPayout {
			mt.PayoutInputs = append(mt.PayoutInputs, PayoutInput{UTxO: u})
			continue
		}
		pos, _ := slices.BinarySearchFunc(sorted, in, chain.TxOutRef.Compare)
		// A copy, decoded from: the decoded inputs alias their bytes.
		ci := ContractInput{UTxO: u, Redeemer: bytes.Clone(spendRedeemer(tx, pos))}
		if ci.Redeemer == nil {
			ci.RedeemerError = "no spend redeemer for this input"
		} else if d, err := pd.Decode(ci.Redeemer); err != nil {
			ci.RedeemerError = err.Error()
		} else if r, err := marlowe.RedeemerFromData(d); err != nil {
			ci.RedeemerError = "redeemer is not a list of Marlowe inputs: " + err.Error()
		} else {
			ci.Inputs = r
		}
		mt.ContractInputs = append(mt.ContractInputs, ci)
	}

	if !tx.IsValid {
		// A phase-2-invalid transaction only consumed its collateral.
		relevant := len(mt.ContractInputs) > 0 || len(mt.PayoutInputs) > 0 || c.paysMarlowe(tx)
		if relevant {
			c.fillCommon(tx, &mt)
		}
		return mt, relevant
	}

	for _, ci := range mt.ContractInputs {
		c.spend(ci.UTxO, changes)
	}
	for _, pi := range mt.PayoutInputs {
		c.spend(pi.UTxO, changes)
	}

	// The continuing output of a contract is the one output to the identical
	// full address; payouts go to the paired payout validator. With more than
	// one contract input the transaction is not a Marlowe step: report it.
	var applying *ContractInput
	if len(mt.ContractInputs) == 1 {
		applying = &mt.ContractInputs[0]
	} else if len(mt.ContractInputs) > 1 {
		for _, ci := range mt.ContractInputs {
			mt.Rejected = append(mt.Rejected, RejectedOutput{
				Ref: ci.UTxO.Ref, Version: ci.UTxO.Version, Role: marlowe.RoleSemantics, ContractID: ci.UTxO.ContractID,
				Reason: fmt.Sprintf("the transaction spends %d contract outputs; a Marlowe step spends one", len(mt.ContractInputs)),
			})
		}
	}
	var applyVersion *marlowe.ScriptVersion
	if applying != nil {
		applyVersion, _ = marlowe.VersionByName(applying.UTxO.Version)
	}
	continued := false
	for i := range tx.Outputs {
		out := &tx.Outputs[i]
		v, role, ok := outputScript(out.Address)
		if !ok {
			continue
		}
		ref := chain.TxOutRef{TxID: tx.ID, Index: uint32(i)}
		switch {
		case role == marlowe.RoleSemantics && applying != nil && !continued && bytes.Equal(out.Address, applying.UTxO.Address):
			continued = true
			c.continuation(tx, out, ref, v, applying, &mt, changes)
		case role == marlowe.RoleSemantics:
			c.creation(tx, out, ref, v, &mt, changes)
		case role == marlowe.RolePayout && applying != nil && applyVersion != nil && v.Payout == applyVersion.Payout:
			c.payout(tx, out, ref, v, applying, &mt, changes)
		}
	}
	relevant := len(mt.ContractInputs) > 0 || len(mt.PayoutInputs) > 0 || len(mt.Creates) > 0 || len(mt.Rejected) > 0
	if relevant {
		c.fillCommon(tx, &mt)
	}
	return mt, relevant
}

// paysMarlowe reports whether any output goes to a Marlowe validator.
func (c *Classifier) paysMarlowe(tx *block.Tx) bool {
	for i := range tx.Outputs {
		if _, _, ok := outputScript(tx.Outputs[i].Address); ok {
			return true
		}
	}
	return false
}

// fillCommon copies what every relevant transaction carries. Byte slices are
// copied so the event does not keep the block's buffer alive.
func (c *Classifier) fillCommon(tx *block.Tx, mt *MarloweTx) {
	for _, m := range tx.Metadata {
		m.Value = bytes.Clone(m.Value)
		mt.Metadata = append(mt.Metadata, m)
		if m.Label == MarloweMetadataLabel && mt.MarloweMetadata == nil {
			mt.MarloweMetadata = m.Value
		}
	}
	mt.Outputs = make([]block.TxOut, len(tx.Outputs))
	for i, o := range tx.Outputs {
		mt.Outputs[i] = cloneOutput(o)
	}
	if len(tx.Datums) > 0 {
		mt.Datums = make(map[chain.Hash32][]byte, len(tx.Datums))
		for h, d := range tx.Datums {
			mt.Datums[h] = bytes.Clone(d)
		}
	}
	for _, m := range tx.Mint {
		m.Name = bytes.Clone(m.Name)
		mt.Mint = append(mt.Mint, m)
	}
}

func cloneOutput(o block.TxOut) block.TxOut {
	o.Address = bytes.Clone(o.Address)
	o.InlineDatum = bytes.Clone(o.InlineDatum)
	if o.DatumHash != nil {
		h := *o.DatumHash
		o.DatumHash = &h
	}
	assets := make([]block.Asset, len(o.Value.Assets))
	for i, a := range o.Value.Assets {
		a.Name = bytes.Clone(a.Name)
		assets[i] = a
	}
	o.Value.Assets = assets
	return o
}

func (c *Classifier) creation(tx *block.Tx, out *block.TxOut, ref chain.TxOutRef, v *marlowe.ScriptVersion, mt *MarloweTx, changes *UTxOChanges) {
	raw, why := resolveDatum(tx, out)
	if raw == nil {
		mt.Rejected = append(mt.Rejected, RejectedOutput{Ref: ref, Version: v.Name, Role: marlowe.RoleSemantics, Reason: why})
		return
	}
	// Decode from a copy: the decoded datum's byte strings alias the bytes
	// they were read from, and events outlive the block.
	raw = bytes.Clone(raw)
	md, err := decodeMarloweDatum(raw)
	if err != nil {
		mt.Rejected = append(mt.Rejected, RejectedOutput{Ref: ref, Version: v.Name, Role: marlowe.RoleSemantics, Reason: err.Error()})
		return
	}
	co := c.contractOutput(out, ref, v, raw, md, ref)
	mt.Creates = append(mt.Creates, co)
	c.track(TrackedUTxO{Ref: ref, Kind: KindContract, ContractID: ref, Version: v.Name, Address: co.Address, Datum: co.Datum}, changes)
}

func (c *Classifier) continuation(tx *block.Tx, out *block.TxOut, ref chain.TxOutRef, v *marlowe.ScriptVersion, in *ContractInput, mt *MarloweTx, changes *UTxOChanges) {
	id := in.UTxO.ContractID
	// The contract stays followed at its new output whatever its datum holds,
	// so that a later step is still recognised.
	tracked := TrackedUTxO{Ref: ref, Kind: KindContract, ContractID: id, Version: v.Name, Address: bytes.Clone(out.Address)}
	raw, why := resolveDatum(tx, out)
	if raw == nil {
		c.track(tracked, changes)
		mt.Rejected = append(mt.Rejected, RejectedOutput{Ref: ref, Version: v.Name, Role: marlowe.RoleSemantics, ContractID: id, Reason: why})
		return
	}
	raw = bytes.Clone(raw)
	md, err := decodeMarloweDatum(raw)
	if err != nil {
		c.track(tracked, changes)
		mt.Rejected = append(mt.Rejected, RejectedOutput{Ref: ref, Version: v.Name, Role: marlowe.RoleSemantics, ContractID: id, Reason: err.Error()})
		return
	}
	co := c.contractOutput(out, ref, v, raw, md, id)
	tracked.Datum = co.Datum
	c.track(tracked, changes)
	mt.Continuations = append(mt.Continuations, co)
}

func (c *Classifier) contractOutput(out *block.TxOut, ref chain.TxOutRef, v *marlowe.ScriptVersion, raw []byte, md *marlowe.MarloweData, id chain.TxOutRef) ContractOutput {
	o := cloneOutput(*out)
	return ContractOutput{Ref: ref, Version: v.Name, Address: o.Address, Value: o.Value, Datum: raw, Data: md, ContractID: id}
}

func (c *Classifier) payout(tx *block.Tx, out *block.TxOut, ref chain.TxOutRef, v *marlowe.ScriptVersion, in *ContractInput, mt *MarloweTx, changes *UTxOChanges) {
	id := in.UTxO.ContractID
	raw, why := resolveDatum(tx, out)
	if raw == nil {
		mt.Rejected = append(mt.Rejected, RejectedOutput{Ref: ref, Version: v.Name, Role: marlowe.RolePayout, ContractID: id, Reason: why})
		return
	}
	raw = bytes.Clone(raw)
	p, err := decodePayoutDatum(raw)
	if err != nil {
		mt.Rejected = append(mt.Rejected, RejectedOutput{Ref: ref, Version: v.Name, Role: marlowe.RolePayout, ContractID: id, Reason: err.Error()})
		return
	}
	o := cloneOutput(*out)
	mt.Payouts = append(mt.Payouts, PayoutOutput{Ref: ref, Version: v.Name, Address: o.Address, Value: o.Value, Datum: raw, Payout: p, ContractID: id})
	c.track(TrackedUTxO{Ref: ref, Kind: KindPayout, ContractID: id, Version: v.Name, Address: o.Address,
		RolesCurrency: bytes.Clone(p.RolesCurrency), Role: bytes.Clone(p.Role)}, changes)
}

// spend removes a tracked output. Changes stay net per block: an output
// created and spent in the same block appears in neither list.
func (c *Classifier) spend(u TrackedUTxO, changes *UTxOChanges) {
	c.utxos.remove(u.Ref)
	for i := range changes.Added {
		if changes.Added[i].Ref == u.Ref {
			changes.Added = slices.Delete(changes.Added, i, i+1)
			return
		}
	}
	changes.Removed = append(changes.Removed, u)
}

func (c *Classifier) track(u TrackedUTxO, changes *UTxOChanges) {
	c.utxos.add(u)
	changes.Added = append(changes.Added, u)
}

// Options returns the options the classifier was made with.
func (c *Classifier) Options() Options { return c.opts }
