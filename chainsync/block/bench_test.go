package block

import (
	"errors"
	"testing"

	"github.com/blinklabs-io/gouroboros/ledger"
)

// benchBlocks are the blocks the benchmarks run on: the two eras whose
// transactions the follower decodes most, and Byron, which is a third of
// mainnet's blocks by count.
var benchBlocks = []struct {
	name string
	typ  Type
}{
	{"conway", TypeConway},
	{"babbage", TypeBabbage},
	{"byron", TypeByron},
}

// BenchmarkDecodeHeader compares DecodeHeader with the baseline,
// gouroboros' ledger.NewBlockFromCbor, which decodes the whole block (and
// checks the body hash) to give the same header fields.
//
//	go test -run '^$' -bench 'BenchmarkDecode' -benchmem ./chainsync/block/
func BenchmarkDecodeHeader(b *testing.B) {
	for _, bb := range benchBlocks {
		raw := mainnet(b, bb.name)
		benchRaw(b, bb.name+"/ours", raw, func() error {
			h, err := DecodeHeader(bb.typ, raw, Options{})
			if err == nil && h.Header.Slot == 0 {
				err = errors.New("no slot")
			}
			return err
		})
		benchRaw(b, bb.name+"/gouroboros", raw, func() error {
			g, err := ledger.NewBlockFromCbor(uint(bb.typ), raw)
			if err == nil && (g.Hash().String() == "" || g.SlotNumber() == 0) {
				err = errors.New("no header")
			}
			return err
		})
	}
}

// BenchmarkDecodeBlock compares DecodeBlock (header and every transaction,
// with ids) with the baseline: gouroboros' ledger.NewBlockFromCbor alone,
// and followed by Transactions() and each transaction's Hash(), which is
// what getting the same data out of it takes.
func BenchmarkDecodeBlock(b *testing.B) {
	for _, bb := range benchBlocks[:2] {
		raw := mainnet(b, bb.name)
		benchRaw(b, bb.name+"/ours", raw, func() error {
			blk, err := DecodeBlock(bb.typ, raw, Options{})
			if err == nil && len(blk.Txs) == 0 {
				err = errors.New("no transactions")
			}
			return err
		})
		benchRaw(b, bb.name+"/ours-copy", raw, func() error {
			_, err := DecodeBlock(bb.typ, raw, Options{Copy: true})
			return err
		})
		benchRaw(b, bb.name+"/gouroboros", raw, func() error {
			_, err := ledger.NewBlockFromCbor(uint(bb.typ), raw)
			return err
		})
		benchRaw(b, bb.name+"/gouroboros-txs", raw, func() error {
			g, err := ledger.NewBlockFromCbor(uint(bb.typ), raw)
			if err != nil {
				return err
			}
			for _, tx := range g.Transactions() {
				_ = tx.Hash()
			}
			return nil
		})
	}
}

// benchRaw runs decode as the sub-benchmark name, in bytes of raw per op;
// an error fails it.
func benchRaw(b *testing.B, name string, raw []byte, decode func() error) {
	b.Run(name, func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if err := decode(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkBuildConwayBlock measures building a full block of random
// transactions, as the devnet generator does.
func BenchmarkBuildConwayBlock(b *testing.B) {
	specs, _ := fullBlock(b, newGen(6).tx)
	b.ReportMetric(float64(len(specs)), "txs/block")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := BuildConwayBlock(HeaderSpec{Slot: 1, BlockNo: 1}, specs); err != nil {
			b.Fatal(err)
		}
	}
}
