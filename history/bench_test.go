package history_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// BenchmarkStoreCommit: the store actor committing blocks of four records
// (an op is 100 blocks, sent and committed) on SQLite, near the tip (a
// commit a block) and syncing (batches), with no subscriber and with four
// live ones reading everything.
func BenchmarkStoreCommit(b *testing.B) {
	for _, c := range []struct {
		name string
		far  bool
		subs int
	}{{"tip/subs=0", false, 0}, {"tip/subs=4", false, 4}, {"sync/subs=0", true, 0}, {"sync/subs=4", true, 4}} {
		b.Run(c.name, func(b *testing.B) { benchStoreCommit(b, c.far, c.subs) })
	}
}

func benchStoreCommit(b *testing.B, far bool, subs int) {
	cfg := history.DefaultStoreConfig()
	cfg.BatchBlocks, cfg.BatchDelay = 50, time.Millisecond
	f := newStoreFixture(b, cfg, "")
	defer f.stop()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range subs {
		sub := f.handle.Subscribe(record.Filter{}, record.From{Kind: record.FromTip})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			for {
				if _, err := sub.Next(ctx); err != nil {
					return
				}
			}
		}()
	}
	var n uint64
	released := make(chan struct{}, 100)
	b.ResetTimer()
	for b.Loop() {
		for range 100 {
			n++
			h := header(n, 0)
			tip := chain.Tip{Point: h.Point(), BlockNo: h.BlockNo}
			if far {
				tip.BlockNo += 1_000_000
			}
			fs := &history.ForwardStep{Header: h, Tip: tip}
			for i := range 4 {
				id := chain.TxOutRef{TxID: h.Hash, Index: uint32(i)}
				fs.Records = append(fs.Records, record.Record{Kind: record.KindInputsApplied, Block: h, TxIndex: i, Contract: &id,
					Payload: []byte(fmt.Sprintf(`{"n":%d,"i":%d}`, n, i))})
			}
			f.system.Root.Send(f.pid, &history.Step{Forward: fs, Release: func() { released <- struct{}{} }})
		}
		for range 100 {
			<-released
		}
	}
	b.StopTimer()
	cancel()
	wg.Wait()
}
