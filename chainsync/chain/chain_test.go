package chain

import (
	"testing"
)

func header(n uint64) BlockHeader {
	var h Hash32
	h[0], h[1] = byte(n), byte(n>>8)
	return BlockHeader{Slot: n * 20, BlockNo: n, Hash: h}
}

func TestBreadcrumbsKeepDenseAndDeepPoints(t *testing.T) {
	b := NewBreadcrumbs(nil)
	for n := uint64(1); n <= 100_000; n++ {
		b.Add(header(n))
	}
	hs := b.Headers()
	if len(hs) > 80 {
		t.Fatalf("kept %d points; spacing should keep few", len(hs))
	}
	for i := 0; i < DenseCrumbs; i++ {
		if hs[i].BlockNo != 100_000-uint64(i) {
			t.Fatalf("dense point %d is block %d", i, hs[i].BlockNo)
		}
	}
	deep := false
	for _, h := range hs {
		if 100_000-h.BlockNo >= 2160 && 100_000-h.BlockNo <= 8*2160 {
			deep = true
		}
	}
	if !deep {
		t.Fatal("no point between 2,160 and 17,280 blocks deep")
	}
	if hs[len(hs)-1].BlockNo != 1 {
		t.Fatal("the oldest point is not kept")
	}
	// Newest first, strictly decreasing.
	for i := 1; i < len(hs); i++ {
		if hs[i].BlockNo >= hs[i-1].BlockNo {
			t.Fatal("points not newest first")
		}
	}
	// Any rollback of up to 2,160 blocks leaves a point at or below the new tip
	// that is at most a few hundred blocks behind it.
	for depth := uint64(1); depth <= 2160; depth += 7 {
		target := 100_000 - depth
		best := uint64(0)
		for _, h := range hs {
			if h.BlockNo <= target && h.BlockNo > best {
				best = h.BlockNo
			}
		}
		if target-best > 1024 {
			t.Fatalf("rollback of %d: nearest kept point %d blocks back", depth, target-best)
		}
	}
}

func TestBreadcrumbsRollBackAndFork(t *testing.T) {
	b := NewBreadcrumbs(nil)
	for n := uint64(1); n <= 50; n++ {
		b.Add(header(n))
	}
	b.RollBack(header(45).Point())
	if tip, _ := b.Tip(); tip.BlockNo != 45 {
		t.Fatalf("tip after rollback %d", tip.BlockNo)
	}
	fork := header(46)
	fork.Hash[5] = 0xff
	b.Add(fork)
	if tip, _ := b.Tip(); tip != fork {
		t.Fatal("fork block not at the tip")
	}
	// A block that replaces the tip at the same height drops the old one.
	again := header(46)
	again.Hash[6] = 0xee
	b.Add(again)
	if pts := b.Points(); pts[0] != again.Point() || pts[1] != header(45).Point() {
		t.Fatalf("points %v", pts[:2])
	}
}

func TestParsing(t *testing.T) {
	p, err := ParsePoint("123.0000000000000000000000000000000000000000000000000000000000000abc")
	if err != nil || p.Slot != 123 || p.Hash[31] != 0xbc {
		t.Fatalf("%v %v", p, err)
	}
	if s := p.String(); s != "123.0000000000000000000000000000000000000000000000000000000000000abc" {
		t.Fatal(s)
	}
	if p, err := ParsePoint("origin"); err != nil || !p.IsOrigin() {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "12", "x.00", "1.zz", "1." + string(make([]byte, 64))} {
		if _, err := ParsePoint(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	r, err := ParseTxOutRef("0000000000000000000000000000000000000000000000000000000000000001#7")
	if err != nil || r.Index != 7 || r.TxID[31] != 1 || r.String() != "0000000000000000000000000000000000000000000000000000000000000001#7" {
		t.Fatalf("%v %v", r, err)
	}
	for _, bad := range []string{"abc", "00#1", "0000000000000000000000000000000000000000000000000000000000000001#-1", "0000000000000000000000000000000000000000000000000000000000000001#99999999999"} {
		if _, err := ParseTxOutRef(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	a := TxOutRef{TxID: Hash32{1}, Index: 2}
	b := TxOutRef{TxID: Hash32{1}, Index: 10}
	c := TxOutRef{TxID: Hash32{2}, Index: 0}
	if a.Compare(b) >= 0 || b.Compare(c) >= 0 || c.Compare(a) <= 0 || a.Compare(a) != 0 {
		t.Fatal("Compare order")
	}
}
