package historytest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// testCheckpoint checks the chain checkpoint and the tracked UTxO set:
// forwards, rollbacks (of blocks committed earlier and of blocks of the same
// batch), horizon pruning, against the in-memory model after every commit.
func (s *suite) testCheckpoint(t *testing.T) {
	for _, seed := range []uint64{41, 42} {
		t.Run(fmt.Sprintf("random %d", seed), func(t *testing.T) {
			b := s.backend(t)
			w := newWriter(t, b, seed, 8)
			w.gen.maxTxs = 6
			flushes, recent := 0, 0
			w.walk(rand.New(rand.NewPCG(seed, 9)), 300, 4, func() {
				checkCheckpoint(t, b, w.checkpoint())
				flushes++
				recent = max(recent, len(w.utxo.undo))
			})
			w.flush()
			checkCheckpoint(t, b, w.checkpoint())
			if w.utxo.horizon == (chain.BlockHeader{}) || recent == 0 || len(w.utxo.set) == 0 || flushes < 10 {
				t.Fatalf("a weak scenario: horizon %+v, at most %d recent changes, %d outputs, %d commits",
					w.utxo.horizon, recent, len(w.utxo.set), flushes)
			}
			w.checkLog(t, "log")
			// What a restarted follower restores: the same, from a new handle.
			b2 := reopen(t, b)
			if err := b2.Init(t.Context(), &history.InitParams{NetworkMagic: TestMagic}); err != nil {
				t.Fatalf("init after reopening: %v", err)
			}
			checkCheckpoint(t, b2, w.checkpoint())
			// The restored set continues: forwards and a rollback on top.
			w.b = b2
			w.play(5, -2, 3, 0)
			checkCheckpoint(t, b2, w.checkpoint())
		})
	}

	t.Run("rollback below the horizon", func(t *testing.T) {
		b := s.backend(t)
		w := newWriter(t, b, 43, 5)
		w.extend(30)
		hz := w.utxo.horizon
		if hz == (chain.BlockHeader{}) {
			t.Fatal("no horizon")
		}
		var below chain.BlockHeader
		for _, blk := range w.chain {
			if blk.Header.Slot < hz.Slot {
				below = blk.Header
			}
		}
		pt := below.Point()
		err := b.Commit(t.Context(), &history.CommitParams{Checkpoint: history.CheckpointUpdate{
			Breadcrumbs: []chain.BlockHeader{below}, UTxO: []history.UTxOStep{{Rollback: &pt}}}})
		wantErr(t, "rollback below the horizon", err, record.ErrRollbackTooDeep)
		checkCheckpoint(t, b, w.checkpoint())
		// To the horizon itself is fine.
		w.rollBackTo(hz)
		for len(w.chain) > 0 && w.chain[len(w.chain)-1].Header.Slot > hz.Slot {
			w.chain, w.states = w.chain[:len(w.chain)-1], w.states[:len(w.states)-1]
		}
		w.fork++
		w.flush()
		checkCheckpoint(t, b, w.checkpoint())
	})

	t.Run("breadcrumbs and tip", func(t *testing.T) {
		b := s.backend(t)
		h := func(n uint64) chain.BlockHeader {
			return chain.BlockHeader{Slot: n * 3, BlockNo: n, Hash: hashOf('h', n, 0, 0)}
		}
		tip := chain.Tip{Point: h(100).Point(), BlockNo: 100}
		commit(t, b, &history.CommitParams{Checkpoint: history.CheckpointUpdate{
			Breadcrumbs: []chain.BlockHeader{h(9), h(8), h(6), h(2)}, Tip: tip}})
		checkCheckpoint(t, b, &history.Checkpoint{Breadcrumbs: []chain.BlockHeader{h(9), h(8), h(6), h(2)}, Tip: tip})
		// Replaced, not merged; the horizon stays when the commit has none.
		tip.BlockNo = 101
		hz := h(1)
		commit(t, b, &history.CommitParams{Checkpoint: history.CheckpointUpdate{
			Breadcrumbs: []chain.BlockHeader{h(10)}, Tip: tip, Horizon: hz}})
		commit(t, b, &history.CommitParams{Checkpoint: history.CheckpointUpdate{
			Breadcrumbs: []chain.BlockHeader{h(11), h(10)}, Tip: tip}})
		checkCheckpoint(t, b, &history.Checkpoint{Breadcrumbs: []chain.BlockHeader{h(11), h(10)}, Tip: tip, Horizon: hz})
	})
}
