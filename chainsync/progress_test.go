package chainsync

import (
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// TestProgressFraction: the followed part of the node's chain is 0 while
// its tip is unknown and 1 at its tip, an empty chain's too (the progress
// bar said "0% | at the tip" while the devnet had no block yet).
func TestProgressFraction(t *testing.T) {
	at := func(slot uint64) chain.Tip { return chain.Tip{Point: chain.Point{Slot: slot}} }
	for _, c := range []struct {
		name string
		s    ProgressSnapshot
		want float64
	}{
		{"tip unknown", ProgressSnapshot{}, 0},
		{"an empty chain", ProgressSnapshot{Connected: true, TipSeenAt: time.Now()}, 1},
		{"half way", ProgressSnapshot{Point: chain.BlockHeader{Slot: 50}, Tip: at(100), TipSeenAt: time.Now()}, 0.5},
		{"at the tip", ProgressSnapshot{Point: chain.BlockHeader{Slot: 100}, Tip: at(100), TipSeenAt: time.Now()}, 1},
		{"past the tip", ProgressSnapshot{Point: chain.BlockHeader{Slot: 120}, Tip: at(100), TipSeenAt: time.Now()}, 1},
	} {
		if got := c.s.Fraction(); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
