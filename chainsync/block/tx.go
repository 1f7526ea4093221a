package block

import (
	"bytes"
	"slices"

	"golang.org/x/crypto/blake2b"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// DatumHash returns the hash of a datum: blake2b-256 of its CBOR bytes
// exactly as they appear on chain.
func DatumHash(raw []byte) chain.Hash32 { return blake2b.Sum256(raw) }

// SortedInputs returns the transaction's inputs as the ledger holds them: a
// set, sorted by transaction id bytes and then index (chain.TxOutRef.Compare),
// with duplicates removed. The wire order in tx.Inputs is whatever the
// transaction's author chose and is often not sorted, even inside a tag-258
// set. A spend redeemer with index i redeems SortedInputs()[i]. The result is
// a new slice.
func (tx *Tx) SortedInputs() []chain.TxOutRef {
	return sortedRefs(tx.Inputs)
}

// sortedRefs returns a sorted copy of refs without duplicates.
func sortedRefs(refs []chain.TxOutRef) []chain.TxOutRef {
	out := slices.Clone(refs)
	slices.SortFunc(out, chain.TxOutRef.Compare)
	return slices.Compact(out)
}

// RedeemedInput returns the input that a spend redeemer redeems: the
// redeemer's Index-th input in SortedInputs order. It reports false for
// other redeemer tags and for an index past the inputs. To look up several
// redeemers, sort once with SortedInputs instead.
func (tx *Tx) RedeemedInput(rd Redeemer) (chain.TxOutRef, bool) {
	if rd.Tag != RedeemerSpend {
		return chain.TxOutRef{}, false
	}
	sorted := tx.SortedInputs()
	if uint64(rd.Index) >= uint64(len(sorted)) {
		return chain.TxOutRef{}, false
	}
	return sorted[rd.Index], true
}

// ProducedOutputs returns the outputs the transaction added to the UTxO set
// and the index of the first one: Outputs from index 0 when the transaction
// is valid, and the collateral return (if any) at index len(Outputs) when it
// failed phase-2 validation.
func (tx *Tx) ProducedOutputs() (outs []TxOut, firstIndex int) {
	if tx.IsValid {
		return tx.Outputs, 0
	}
	if tx.CollateralReturn == nil {
		return nil, len(tx.Outputs)
	}
	return []TxOut{*tx.CollateralReturn}, len(tx.Outputs)
}

// SpentInputs returns the inputs the transaction removed from the UTxO set:
// its inputs when it is valid, and its collateral when it failed phase-2
// validation.
func (tx *Tx) SpentInputs() []chain.TxOutRef {
	if tx.IsValid {
		return tx.Inputs
	}
	return tx.Collateral
}

// Clone returns a deep copy of the block that shares no memory with the
// buffer it was decoded from.
func (b *Block) Clone() *Block {
	c := *b
	if b.Txs != nil {
		c.Txs = make([]Tx, len(b.Txs))
		for i := range b.Txs {
			c.Txs[i] = b.Txs[i].Clone()
		}
	}
	return &c
}

// Clone returns a deep copy of the transaction that shares no memory with the
// block buffer it was decoded from, so the buffer can be reused or freed
// while the copy is kept.
func (tx *Tx) Clone() Tx {
	c := *tx
	c.Inputs = slices.Clone(tx.Inputs)
	c.Collateral = slices.Clone(tx.Collateral)
	c.ReferenceInputs = slices.Clone(tx.ReferenceInputs)
	if tx.Outputs != nil {
		c.Outputs = make([]TxOut, len(tx.Outputs))
		for i := range tx.Outputs {
			c.Outputs[i] = tx.Outputs[i].Clone()
		}
	}
	if tx.CollateralReturn != nil {
		o := tx.CollateralReturn.Clone()
		c.CollateralReturn = &o
	}
	if tx.Mint != nil {
		c.Mint = make([]MintAsset, len(tx.Mint))
		for i, m := range tx.Mint {
			m.Name = cloneBytes(m.Name)
			c.Mint[i] = m
		}
	}
	c.ValidityStart = clonePtr(tx.ValidityStart)
	c.TTL = clonePtr(tx.TTL)
	if tx.Datums != nil {
		c.Datums = make(map[chain.Hash32][]byte, len(tx.Datums))
		for h, d := range tx.Datums {
			c.Datums[h] = cloneBytes(d)
		}
	}
	if tx.Redeemers != nil {
		c.Redeemers = make([]Redeemer, len(tx.Redeemers))
		for i, rd := range tx.Redeemers {
			rd.Data = cloneBytes(rd.Data)
			c.Redeemers[i] = rd
		}
	}
	if tx.Metadata != nil {
		c.Metadata = make([]Metadatum, len(tx.Metadata))
		for i, m := range tx.Metadata {
			m.Value = cloneBytes(m.Value)
			c.Metadata[i] = m
		}
	}
	return c
}

// Clone returns a deep copy of the output that shares no memory with the
// block buffer it was decoded from.
func (o *TxOut) Clone() TxOut {
	c := *o
	c.Address = cloneBytes(o.Address)
	c.DatumHash = clonePtr(o.DatumHash)
	c.InlineDatum = cloneBytes(o.InlineDatum)
	if o.Value.Assets != nil {
		c.Value.Assets = make([]Asset, len(o.Value.Assets))
		for i, a := range o.Value.Assets {
			a.Name = cloneBytes(a.Name)
			c.Value.Assets[i] = a
		}
	}
	return c
}

// cloneBytes copies b, keeping nil as nil.
func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return bytes.Clone(b)
}

// clonePtr returns a pointer to a copy of *p, or nil.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
