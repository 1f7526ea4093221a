package contractstoretest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
)

// testSources checks the contract sources: a source revealed by two
// contracts is stored once and first revealed by the earlier; a closure
// goes through revealed sources only and names the hashes not revealed;
// a reset takes away the links of its contracts and the sources no other
// contract links; a hash never revealed is ErrNotFound.
func testSources(t *testing.T, b contractstore.Backend) {
	ctx := ctxOf(t)
	m, g := fillStore(t, b, 2)
	ids := m.list(&contractstore.ContractFilter{})
	c1, c2 := ids[0].ID, ids[1].ID
	h := func(n byte) chain.Hash32 { return hashOf('s', uint64(n)) }
	src := func(n byte, refs ...byte) contractstore.Source {
		s := contractstore.Source{Hash: h(n), Contract: json.RawMessage(fmt.Sprintf(`{"when":[],"timeout":%d,"timeout_continuation":"close"}`, n))}
		for _, r := range refs {
			s.Refs = append(s.Refs, h(r))
		}
		slices.SortFunc(s.Refs, func(a, b chain.Hash32) int { return bytes.Compare(a[:], b[:]) })
		return s
	}
	// top -> a, b; a -> leaf, x (never revealed); b -> leaf; shared is
	// revealed by both contracts.
	top, a, bb, leaf, shared := src(1, 2, 3), src(2, 4, 9), src(3, 4), src(4), src(5)
	link := func(c chain.TxOutRef, s contractstore.Source, seq int64) contractstore.SourceLink {
		return contractstore.SourceLink{ContractID: c, Hash: s.Hash, TxID: hashOf('t', uint64(seq)), Seq: seq}
	}
	commitNext := func(p *contractstore.CommitParams) {
		t.Helper()
		g.seq++
		p.PrevSeq, p.Head = m.head.Seq, m.head
		p.Head.Seq, p.Head.Block = g.seq, block(g.seq)
		if err := b.Commit(ctx, p); err != nil {
			t.Fatal(err)
		}
		m.apply(p)
	}
	commitNext(&contractstore.CommitParams{Sources: []contractstore.Source{top, shared, shared},
		SourceLinks: []contractstore.SourceLink{link(c1, top, g.seq+1), link(c1, shared, g.seq+1)}})
	commitNext(&contractstore.CommitParams{Sources: []contractstore.Source{a, bb, leaf, shared},
		SourceLinks: []contractstore.SourceLink{link(c1, a, g.seq+1), link(c1, bb, g.seq+1), link(c2, leaf, g.seq+1),
			link(c2, shared, g.seq+1), link(c1, top, g.seq+1)}})
	firstTop := m.head.Seq - 1
	got, at, err := b.SourceGet(ctx, top.Hash)
	if err != nil || at != m.head.Position {
		t.Fatalf("source get: %v at %+v", err, at)
	}
	if !jsonEqual(got.Contract, top.Contract) || !slices.Equal(got.Refs, top.Refs) || got.Revealed.ContractID != c1 ||
		got.Revealed.Seq != firstTop || got.Revealed.TxID != hashOf('t', uint64(firstTop)) {
		t.Fatalf("source %+v, want %+v first revealed at %d by %s", got, top, firstTop, c1)
	}
	if got, _, err := b.SourceGet(ctx, shared.Hash); err != nil || got.Revealed.ContractID != c1 || len(got.Refs) != 0 {
		t.Fatalf("the shared source: %+v, %v", got, err)
	}
	if got, _, err := b.SourceGet(ctx, a.Hash); err != nil || !slices.Equal(got.Refs, a.Refs) || !slices.Equal(got.Unrevealed, []chain.Hash32{h(9)}) {
		t.Fatalf("a source with a reference never revealed: %+v, %v", got, err)
	}
	checkClosure(t, b, top.Hash, []chain.Hash32{h(1), h(2), h(3), h(4)}, []chain.Hash32{h(9)})
	checkClosure(t, b, bb.Hash, []chain.Hash32{h(3), h(4)}, nil)
	if _, _, err := b.SourceGet(ctx, h(9)); !errors.Is(err, contractstore.ErrNotFound) {
		t.Fatalf("a hash never revealed: %v", err)
	}
	if _, _, err := b.SourceClosure(ctx, h(9), false); !errors.Is(err, contractstore.ErrNotFound) {
		t.Fatalf("the closure of a hash never revealed: %v", err)
	}
	// A rollback of c2 (rebuilt without its links): leaf goes, shared stays
	// (c1 links it), and a's closure names leaf as not revealed.
	commitNext(&contractstore.CommitParams{Reset: []chain.TxOutRef{c2}, Contracts: []contractstore.Contract{*m.contracts[c2]}})
	if _, _, err := b.SourceGet(ctx, leaf.Hash); !errors.Is(err, contractstore.ErrNotFound) {
		t.Fatalf("a source only a rolled-back contract revealed: %v", err)
	}
	if _, _, err := b.SourceGet(ctx, shared.Hash); err != nil {
		t.Fatalf("a source another contract revealed too: %v", err)
	}
	checkClosure(t, b, top.Hash, []chain.Hash32{h(1), h(2), h(3)}, []chain.Hash32{h(4), h(9)})
	if got, _, err := b.SourceGet(ctx, bb.Hash); err != nil || !slices.Equal(got.Unrevealed, []chain.Hash32{h(4)}) {
		t.Fatalf("a source whose reference was rolled back: %+v, %v", got, err)
	}
	// And of c1: nothing is left.
	commitNext(&contractstore.CommitParams{Reset: []chain.TxOutRef{c1}, Contracts: []contractstore.Contract{*m.contracts[c1]}})
	for _, s := range []contractstore.Source{top, a, bb, shared} {
		if _, _, err := b.SourceGet(ctx, s.Hash); !errors.Is(err, contractstore.ErrNotFound) {
			t.Fatalf("source %s after every contract that revealed it rolled back: %v", s.Hash, err)
		}
	}
}

func checkClosure(t *testing.T, b contractstore.Backend, hash chain.Hash32, revealed, unrevealed []chain.Hash32) {
	t.Helper()
	for _, with := range []bool{false, true} {
		c, _, err := b.SourceClosure(ctxOf(t), hash, with)
		if err != nil {
			t.Fatal(err)
		}
		var got []chain.Hash32
		for _, s := range c.Sources {
			got = append(got, s.Hash)
			if with != (len(s.Contract) > 0) {
				t.Fatalf("closure of %s (contracts %v): source %s has contract %q", hash, with, s.Hash, s.Contract)
			}
		}
		slices.SortFunc(revealed, func(a, b chain.Hash32) int { return bytes.Compare(a[:], b[:]) })
		slices.SortFunc(unrevealed, func(a, b chain.Hash32) int { return bytes.Compare(a[:], b[:]) })
		if !slices.Equal(got, revealed) || !slices.Equal(c.Unrevealed, unrevealed) {
			t.Fatalf("closure of %s: %v and unrevealed %v, want %v and %v", hash, got, c.Unrevealed, revealed, unrevealed)
		}
	}
}
