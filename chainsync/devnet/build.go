package devnet

import (
	"fmt"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
)

// txIDAndSize computes a transaction's id and its size in a block body.
func txIDAndSize(tx *block.Tx) (chain.Hash32, int) {
	id, err := block.TxID(tx)
	if err != nil {
		panic(fmt.Sprintf("devnet: generated an unbuildable transaction: %v", err))
	}
	size, err := block.TxSize(tx)
	if err != nil {
		panic(fmt.Sprintf("devnet: generated an unbuildable transaction: %v", err))
	}
	return id, size
}

// buildConwayBlock builds a block of txs on top of prev.
func buildConwayBlock(slot, blockNo uint64, prev chain.Hash32, txs []block.Tx) ([]byte, chain.BlockHeader, error) {
	raw, b, err := block.BuildConwayBlock(block.HeaderSpec{Slot: slot, BlockNo: blockNo, PrevHash: prev}, txs)
	if err != nil {
		return nil, chain.BlockHeader{}, err
	}
	for i := range txs {
		if b.Txs[i].ID != txs[i].ID {
			return nil, chain.BlockHeader{}, fmt.Errorf("tx %d: id %s in the block, %s when built alone", i, b.Txs[i].ID, txs[i].ID)
		}
	}
	return raw, b.Header, nil
}
