package devnet

import (
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// TestJournalResumesWhereTheClientStands checks where a client that
// intersects at a block the chain was rolled back to continues: right after
// the block's append (before the fork) unless its history says it took the
// rollback, then right after the rollback that undid what it names.
func TestJournalResumesWhereTheClientStands(t *testing.T) {
	blk := func(slot uint64, no uint64, tag byte) StoredBlock {
		var h chain.Hash32
		h[0], h[1] = byte(slot), tag
		return StoredBlock{Header: chain.BlockHeader{Slot: slot, Hash: h, BlockNo: no}}
	}
	w := blk(10, 1, 'w')
	x1, x2 := blk(11, 2, 'x'), blk(12, 3, 'x')
	z1 := blk(11, 2, 'z')
	y1 := blk(13, 2, 'y')
	j := NewJournal()
	tipAt := func(b StoredBlock) chain.Tip { return chain.Tip{Point: b.Header.Point(), BlockNo: b.Header.BlockNo} }
	j.Append(w)
	j.Append(x1)
	j.Append(x2)
	j.RollBack(w.Header.Point(), tipAt(w)) // undoes the fork x (with records, say)
	j.Append(z1)
	j.RollBack(w.Header.Point(), tipAt(w)) // undoes z (no trace in the client's history)
	j.Append(y1)

	// next intersects a new reader at w and returns the block it is served
	// after the confirming roll-backward.
	next := func() chain.Point {
		t.Helper()
		r := j.NewReader()
		if p, _, ok := r.Intersect([]chain.Point{w.Header.Point()}); !ok || p != w.Header.Point() {
			t.Fatalf("intersect: %v %v", p, ok)
		}
		if s, _ := r.Next(); s.Kind != StepRollBackward || s.Point != w.Header.Point() {
			t.Fatalf("first step %+v, want the roll-backward to the intersection", s)
		}
		s, _ := r.Next()
		if s.Kind != StepRollForward {
			t.Fatalf("second step %+v, want a roll-forward", s)
		}
		return s.Block.Header.Point()
	}
	if got := next(); got != x1.Header.Point() {
		t.Errorf("without a resume: served %v, want the fork's first block %v", got, x1.Header.Point())
	}
	cases := []struct {
		name   string
		undone chain.Point
		took   bool
		want   chain.Point
	}{
		{"its history holds no rollback to the block", chain.Point{}, false, x1.Header.Point()},
		{"it took the fork x and its rollback", x2.Header.Point(), true, z1.Header.Point()},
		{"it took the fork x's first block and its rollback", x1.Header.Point(), true, z1.Header.Point()},
		{"it took the fork z and its rollback", z1.Header.Point(), true, y1.Header.Point()},
		{"it names a block the journal does not have", chain.Point{Slot: 99}, true, x1.Header.Point()},
	}
	for _, c := range cases {
		var asked chain.Point
		j.SetResume(func(p chain.Point) (chain.Point, bool) { asked = p; return c.undone, c.took })
		if got := next(); got != c.want {
			t.Errorf("%s: served %v, want %v", c.name, got, c.want)
		}
		if asked != w.Header.Point() {
			t.Errorf("%s: the resume was asked about %v, want %v", c.name, asked, w.Header.Point())
		}
	}

	// A block no rollback went back to is never asked about.
	j.SetResume(func(p chain.Point) (chain.Point, bool) {
		t.Errorf("asked about %v", p)
		return chain.Point{}, false
	})
	r := j.NewReader()
	if _, _, ok := r.Intersect([]chain.Point{y1.Header.Point()}); !ok {
		t.Fatal("intersect at y1")
	}
	r.Next()
	if s, _ := r.Next(); s.Kind != StepAwait {
		t.Errorf("after the tip: %+v, want to wait", s)
	}
}
