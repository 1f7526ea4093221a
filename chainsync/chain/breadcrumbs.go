package chain

import (
	"cmp"
	"math/bits"
	"slices"
)

// DenseCrumbs is how many of the newest blocks Breadcrumbs keeps every point of.
const DenseCrumbs = 32

// Breadcrumbs keeps a few points of the recent chain to intersect with after
// a restart or reconnection: every one of the newest DenseCrumbs blocks, then
// points ever further apart (spacing doubles with age), and always the oldest
// point it was given (two points per doubling of age), so that a rollback of up to the security parameter k
// (2,160 blocks) still finds a common point once the chain has grown beyond
// it.
type Breadcrumbs struct {
	crumbs []BlockHeader // oldest first
}

// NewBreadcrumbs returns breadcrumbs holding the given headers (any order).
func NewBreadcrumbs(headers []BlockHeader) *Breadcrumbs {
	b := &Breadcrumbs{crumbs: slices.Clone(headers)}
	slices.SortFunc(b.crumbs, func(x, y BlockHeader) int { return cmp.Compare(x.BlockNo, y.BlockNo) })
	b.thin()
	return b
}

// Add records a new block at the tip.
func (b *Breadcrumbs) Add(h BlockHeader) {
	// A block at or below the newest crumb's number replaces the fork it
	// belongs to: drop what it supersedes.
	for len(b.crumbs) > 0 && b.crumbs[len(b.crumbs)-1].BlockNo >= h.BlockNo {
		b.crumbs = b.crumbs[:len(b.crumbs)-1]
	}
	b.crumbs = append(b.crumbs, h)
	b.thin()
}

// RollBack forgets every point after p (by slot).
func (b *Breadcrumbs) RollBack(p Point) {
	for len(b.crumbs) > 0 && b.crumbs[len(b.crumbs)-1].Slot > p.Slot {
		b.crumbs = b.crumbs[:len(b.crumbs)-1]
	}
}

// Headers returns the kept headers, newest first.
func (b *Breadcrumbs) Headers() []BlockHeader {
	out := slices.Clone(b.crumbs)
	slices.Reverse(out)
	return out
}

// Points returns the kept points, newest first, as a node's FindIntersect wants them.
func (b *Breadcrumbs) Points() []Point {
	out := make([]Point, len(b.crumbs))
	for i, h := range b.crumbs {
		out[len(b.crumbs)-1-i] = h.Point()
	}
	return out
}

// Tip returns the newest header and whether there is one.
func (b *Breadcrumbs) Tip() (BlockHeader, bool) {
	if len(b.crumbs) == 0 {
		return BlockHeader{}, false
	}
	return b.crumbs[len(b.crumbs)-1], true
}

// thin drops crumbs that the spacing rule no longer keeps.
func (b *Breadcrumbs) thin() {
	if len(b.crumbs) <= DenseCrumbs+1 {
		return
	}
	tip := b.crumbs[len(b.crumbs)-1].BlockNo
	kept := b.crumbs[:0]
	for i, h := range b.crumbs {
		age := tip - h.BlockNo
		keep := i == 0 || age < DenseCrumbs
		if !keep {
			step := uint64(1) << (bits.Len64(age/DenseCrumbs) + 3)
			keep = h.BlockNo%step == 0
		}
		if keep {
			kept = append(kept, h)
		}
	}
	b.crumbs = kept
}
