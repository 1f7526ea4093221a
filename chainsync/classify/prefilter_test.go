package classify_test

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/devnet"
)

// TestPrefilterEqualsFullDecode is the prefilter's safety property: on
// generated chains (rollbacks included), classifying with the prefilter gives
// exactly the events of classifying with every block decoded, block by block.
func TestPrefilterEqualsFullDecode(t *testing.T) {
	configs := []struct {
		share  float64
		size   int
		blocks int
	}{
		{0, 7700, 300},
		{0.01, 7700, 1500},
		{0.1, 7700, 1500},
		{0.5, 2000, 1500},
		{1, 500, 800},
	}
	for i, c := range configs {
		for seed := int64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("share=%v/seed=%d", c.share, seed), func(t *testing.T) {
				cfg := devnet.DefaultGeneratorConfig()
				cfg.Seed = seed*100 + int64(i)
				cfg.MarloweShare, cfg.MeanBlockSize = c.share, c.size
				cfg.RollbackEvery, cfg.MaxRollbackDepth = 40, 5
				comparePrefilter(t, cfg, c.blocks)
			})
		}
	}
}

func comparePrefilter(t *testing.T, cfg devnet.GeneratorConfig, n int) {
	g, err := devnet.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pre := classify.New(classify.Options{})
	full := classify.New(classify.Options{DecodeAll: true})
	relevant, skipped := 0, 0
	for range n {
		op, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		tip := chain.Tip{Point: g.Tip().Point(), BlockNo: g.Tip().BlockNo}
		if op.Rollback != nil {
			a, errA := pre.RollBackward(*op.Rollback, tip)
			b, errB := full.RollBackward(*op.Rollback, tip)
			if errA != nil || errB != nil {
				t.Fatalf("rollback: %v / %v", errA, errB)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("rollback to %s differs", op.Rollback)
			}
			continue
		}
		a, errA := pre.RollForward(op.Block.Type, op.Block.Raw, tip)
		b, errB := full.RollForward(op.Block.Type, op.Block.Raw, tip)
		if errA != nil || errB != nil {
			t.Fatalf("block %d: %v / %v", op.Block.Header.BlockNo, errA, errB)
		}
		if !b.Decoded {
			t.Fatal("the full classifier did not decode a block")
		}
		if len(b.Txs) > 0 {
			relevant++
		}
		if !a.Decoded {
			skipped++
		}
		a.Decoded, b.Decoded = false, false
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("block %d: prefiltered classification differs from full decoding\npre:  %+v\nfull: %+v", op.Block.Header.BlockNo, a, b)
		}
	}
	if !reflect.DeepEqual(pre.UTxOs().All(), full.UTxOs().All()) {
		t.Fatal("UTxO sets differ at the end")
	}
	t.Logf("%d blocks with Marlowe activity, %d blocks skipped by the prefilter", relevant, skipped)
	if cfg.MarloweShare > 0 && cfg.MarloweShare < 1 && skipped == 0 {
		t.Fatal("the prefilter skipped nothing")
	}
}

// TestPrefilterFindsPatternsAnywhere plants a script hash and a tracked
// transaction id at every offset of a buffer.
func TestPrefilterFindsPatternsAnywhere(t *testing.T) {
	p := classify.NewPrefilter()
	var id chain.Hash32
	for i := range id {
		id[i] = byte(0xa0 + i)
	}
	buf := make([]byte, 300)
	if p.Match(buf) {
		t.Fatal("zero buffer matched")
	}
	script := chain.Hash28{}
	copy(script[:], mustHash28(t, "377325ad84a55ba0282d844dff2d5f0f18c33fd4a28a0a9d73c6f60d"))
	for off := 0; off+28 <= len(buf); off++ {
		b := make([]byte, len(buf))
		copy(b[off:], script[:])
		if !p.Match(b) {
			t.Fatalf("script hash at offset %d not found", off)
		}
	}
	b := make([]byte, len(buf))
	copy(b[100:], id[:])
	if p.Match(b) {
		t.Fatal("an untracked id matched")
	}
	p.AddTxID(id)
	for off := 0; off+32 <= len(buf); off++ {
		b := make([]byte, len(buf))
		copy(b[off:], id[:])
		if !p.Match(b) {
			t.Fatalf("tracked id at offset %d not found", off)
		}
	}
	// A truncated id at the very end is not a match.
	b = make([]byte, len(buf))
	copy(b[len(buf)-31:], id[:31])
	if p.Match(b) {
		t.Fatal("a truncated id matched")
	}
	p.RemoveTxID(id)
	copy(b[10:], id[:])
	if p.Match(b) {
		t.Fatal("a removed id still matches")
	}
}

func mustHash28(t testing.TB, s string) []byte {
	h, err := chain.ParseHash28(s)
	if err != nil {
		t.Fatal(err)
	}
	return h[:]
}

var _ = block.TypeConway

// BenchmarkPrefilter measures the raw-byte scan over a real Conway block with
// 1,000 tracked transaction ids, against bytes.Index of one hash as the
// baseline of a single-pattern search.
func BenchmarkPrefilter(b *testing.B) {
	raw := readBlock(b, "conway")
	p := classify.NewPrefilter()
	for i := range 1000 {
		var id chain.Hash32
		id[0], id[1], id[2] = byte(i), byte(i>>8), 0x5a
		p.AddTxID(id)
	}
	b.Run("prefilter", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if p.Match(raw) {
				b.Fatal("matched")
			}
		}
	})
	needle := mustHash28(b, "377325ad84a55ba0282d844dff2d5f0f18c33fd4a28a0a9d73c6f60d")
	b.Run("bytes.Index-one-hash", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if bytes.Index(raw, needle) >= 0 {
				b.Fatal("matched")
			}
		}
	})
}
