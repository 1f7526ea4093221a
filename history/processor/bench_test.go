package processor

import (
	"testing"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/devnet"
)

// BenchmarkProcess: the processor on a generated chain's classified
// blocks (60% of the transactions Marlowe), one block an op.
func BenchmarkProcess(b *testing.B) {
	cfg := devnet.DefaultGeneratorConfig()
	cfg.MarloweShare, cfg.MeanBlockSize, cfg.RollbackEvery = 0.6, 2000, 0
	var events []classify.Event
	classifyGenerated(b, cfg, 400, func(ev *classify.RollForward) { events = append(events, ev) })
	p := New(devnetSlots, zap.NewNop(), nil)
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
