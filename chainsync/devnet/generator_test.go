package devnet

import (
	"testing"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/classify"
)

// follow runs a generator for n operations and classifies every block as
// the follower would, returning what the classifier saw on the final chain.
func follow(t *testing.T, cfg GeneratorConfig, n int, opts classify.Options) (*Generator, []Activity, classify.Stats) {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := classify.New(opts)
	var perBlock [][]Activity
	for range n {
		op, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		if op.Rollback != nil {
			if _, err := c.RollBackward(*op.Rollback, chainTip(g)); err != nil {
				t.Fatal(err)
			}
			// Activity of the blocks after the rollback point is gone.
			keep := 0
			for i := range perBlock {
				if uint64(i+1) <= g.Tip().BlockNo {
					keep = i + 1
				}
			}
			perBlock = perBlock[:keep]
			continue
		}
		// Every generated block must decode with our decoder.
		if _, err := block.DecodeBlock(op.Block.Type, op.Block.Raw, block.Options{}); err != nil {
			t.Fatalf("block %d: %v", op.Block.Header.BlockNo, err)
		}
		ev, err := c.RollForward(op.Block.Type, op.Block.Raw, chainTip(g))
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Failures) > 0 {
			t.Fatalf("block %d: failures %v", ev.Header.BlockNo, ev.Failures)
		}
		acts, err := ActivityOf(ev)
		if err != nil {
			t.Fatal(err)
		}
		perBlock = append(perBlock, acts)
	}
	var all []Activity
	for _, a := range perBlock {
		all = append(all, a...)
	}
	return g, all, c.Stats()
}

func TestGeneratedActivityIsClassified(t *testing.T) {
	cfg := DefaultGeneratorConfig()
	cfg.MarloweShare = 0.5
	cfg.MeanBlockSize = 3000
	g, got, stats := follow(t, cfg, 1500, classify.Options{})
	want := g.Activity()
	if len(want) < 300 {
		t.Fatalf("only %d activities generated", len(want))
	}
	if err := ClassifierMismatch(got, want); err != nil {
		t.Fatalf("classified: %v", err)
	}
	kinds := map[string]int{}
	for _, a := range want {
		kinds[a.Kind]++
	}
	t.Logf("%d activities %v; %d blocks, %d decoded", len(want), kinds, stats.Blocks, stats.Decoded)
	for _, k := range []string{ActivityCreate, ActivityApply, ActivityWithdraw, ActivityInvalid, ActivityRejected} {
		if kinds[k] == 0 {
			t.Errorf("no %s activity generated", k)
		}
	}
}
