package contracts

import (
	"bytes"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/record"
)

// The contract sources a fold reveals (contractstore.Source): the initial
// contract of every contract created, and the continuation of every
// merkleized case a step's inputs carried. A source is its contract's hash,
// the datum hash of its Plutus Data, which the Marlowe Runtime calls its
// ContractSourceId (for a continuation, the case's continuation hash), and
// is linked to the contract whose record revealed it, so that it goes with
// that contract's records in a rollback.

// reveal adds a source revealed by a record of e's contract and returns
// its hash. want, when set, is the hash the record says the contract has
// (a merkleized input's continuation hash); a contract whose hash differs
// is left out (the validator would have refused it) and logged, as is one
// core JSON cannot show: reveal returns nil for them.
func (f *folder) reveal(e *entry, r *record.Record, ct marlowe.Contract, want []byte) *chain.Hash32 {
	h := marlowe.ContinuationHash(ct)
	if want != nil && !bytes.Equal(want, h[:]) {
		f.log.Warn("a merkleized input's continuation does not have its hash; not kept as a source",
			zap.Int64("seq", r.Seq), zap.Stringer("contract", e.row.ID))
		return nil
	}
	body, err := marlowe.ContractJSON(ct)
	if err != nil {
		f.log.Warn("a revealed contract cannot be shown in core JSON; not kept as a source",
			zap.Int64("seq", r.Seq), zap.Stringer("contract", e.row.ID), zap.Error(err))
		return nil
	}
	hash := chain.Hash32(h)
	if f.sources == nil {
		f.sources = map[chain.Hash32]bool{}
	}
	if !f.sources[hash] {
		f.sources[hash] = true
		src := contractstore.Source{Hash: hash, Contract: body}
		for _, ref := range marlowe.MerkleizedHashes(ct) {
			src.Refs = append(src.Refs, chain.Hash32(ref))
		}
		f.p.Sources = append(f.p.Sources, src)
	}
	f.p.SourceLinks = append(f.p.SourceLinks, contractstore.SourceLink{ContractID: e.row.ID, Hash: hash, TxID: r.TxID, Seq: r.Seq})
	return &hash
}
