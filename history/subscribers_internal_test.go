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
