package history

import (
	"slices"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
)

// TestMatchingSharesAWholeBatch: a filter that matches every record of a
// live batch gets the batch itself, capped so that an append copies; one
// that matches some gets a copy of those, in order.
func TestMatchingSharesAWholeBatch(t *testing.T) {
	recs := make([]record.Record, 4, 8)
	for i := range recs {
		recs[i] = record.Record{Seq: int64(i + 1), Kind: record.KindContractCreated}
	}
	recs[2].Kind = record.KindInputsApplied
	noIndex := func(*chain.TxOutRef) *record.ContractIndex { return nil }

	all := matching(recs, &record.Filter{}, noIndex)
	if len(all) != 4 || &all[0] != &recs[0] || cap(all) != 4 {
		t.Fatalf("a filter of every record: len %d cap %d, shared %v", len(all), cap(all), &all[0] == &recs[0])
	}
	some := matching(recs, &record.Filter{Kinds: []record.Kind{record.KindContractCreated}}, noIndex)
	if seqs := seqsOf(some); !slices.Equal(seqs, []int64{1, 2, 4}) || &some[0] == &recs[0] {
		t.Fatalf("a filter of some: %v (shared %v)", seqs, &some[0] == &recs[0])
	}
	if none := matching(recs, &record.Filter{Kinds: []record.Kind{record.KindPayoutWithdrawn}}, noIndex); len(none) != 0 {
		t.Fatalf("a filter of none: %v", seqsOf(none))
	}
}

func seqsOf(recs []record.Record) []int64 {
	var out []int64
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

// TestTailAfter: what the tail hands a go-live request behind the head,
// and when it cannot say (the request goes back to catch up).
func TestTailAfter(t *testing.T) {
	batch := func(from, n int64) []record.Record {
		out := make([]record.Record, n)
		for i := range out {
			out[i] = record.Record{Seq: from + int64(i), Kind: record.KindContractCreated}
		}
		return out
	}
	index := func(*chain.TxOutRef) *record.ContractIndex { return nil }
	tl := tail{limit: 6}
	tl.add(batch(1, 3), index) // 1..3
	tl.add(batch(4, 2), nil)   // 4..5, fanned out without an index
	tl.add(batch(6, 3), index) // 6..8: 1..3 leave (8 records > 6)
	all, needs := &record.Filter{}, &record.Filter{Tags: []string{"t"}}
	for _, c := range []struct {
		name         string
		cursor, head int64
		filter       *record.Filter
		max          int
		want         []int64
		ok           bool
	}{
		{"at the head", 8, 8, all, 0, nil, true},
		{"in the newest batch", 6, 8, all, 0, []int64{7, 8}, true},
		{"from the tail's start", 3, 8, all, 0, []int64{4, 5, 6, 7, 8}, true},
		{"before the tail", 2, 8, all, 0, nil, false},
		{"more than max", 3, 8, all, 4, nil, false},
		{"up to max", 5, 8, all, 3, []int64{6, 7, 8}, true},
		{"a filter needing an index the batch lacks", 3, 8, needs, 0, nil, false},
		{"a filter needing an index, past that batch", 5, 8, needs, 0, nil, true},
		{"a head the tail does not reach", 8, 9, all, 0, nil, false},
	} {
		got, ok := tl.after(c.cursor, c.head, c.filter, c.max)
		if ok != c.ok || !slices.Equal(seqsOf(got), c.want) {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, seqsOf(got), ok, c.want, c.ok)
		}
	}
	if from := tl.from(8); from != 3 {
		t.Errorf("from %d, want 3", from)
	}
	tl.add(batch(20, 1), index) // the log went on without the tail
	if got, ok := tl.after(19, 20, all, 0); !ok || !slices.Equal(seqsOf(got), []int64{20}) || tl.from(20) != 19 {
		t.Errorf("after a gap: %v, %v, from %d; want only the new batch", seqsOf(got), ok, tl.from(20))
	}
}
