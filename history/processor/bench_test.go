package processor_test

import (
	"testing"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/history/processor"
)

// BenchmarkProcess: the processor on a generated chain's classified
// blocks (60% of the transactions Marlowe), one block an op.
func BenchmarkProcess(b *testing.B) {
	cfg := devnet.DefaultGeneratorConfig()
	cfg.MarloweShare, cfg.MeanBlockSize, cfg.RollbackEvery = 0.6, 2000, 0
	g, err := devnet.NewGenerator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	c := classify.New(classify.Options{})
	var events []classify.Event
	for g.Tip().BlockNo < 400 {
		op, err := g.Next()
		if err != nil {
			b.Fatal(err)
		}
		ev, err := c.RollForward(op.Block.Type, op.Block.Raw, chain.Tip{})
		if err != nil {
			b.Fatal(err)
		}
		events = append(events, ev)
	}
	slots := chain.SlotConfig{ZeroTimeMillis: devnet.ZeroTimeMillis, SlotLengthMillis: devnet.SlotLengthMillis}
	p := processor.New(slots, zap.NewNop(), nil)
	records, i := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		if st := p.Process(events[i%len(events)]); st != nil && st.Forward != nil {
			records += len(st.Forward.Records)
		}
		i++
	}
	b.ReportMetric(float64(records)/float64(i), "records/op")
}
