package historytest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// testFilters checks record filters: on a small hand-made log with the
// expected seqs written out, then on a generated log with rollbacks
// against history.Filter.Matches, in both modes.
func (s *suite) testFilters(t *testing.T) {
	t.Run("handmade", s.testFiltersHandmade)
	t.Run("model", s.testFiltersModel)
}

func (s *suite) testFiltersHandmade(t *testing.T) {
	b := s.backend(t)
	curA, curB := currencies[1], currencies[2]
	c := func(n uint32) chain.TxOutRef { return chain.TxOutRef{TxID: hashOf('c', 9, 9, 9), Index: n} }
	c1, c2, c3, c4 := c(1), c(2), c(3), c(4)
	blk := func(n uint64) chain.BlockHeader {
		return chain.BlockHeader{Slot: 10 * n, BlockNo: n, Hash: hashOf('b', 9, 0, n)}
	}
	rec := func(seq int64, n uint64, k record.Kind, id *chain.TxOutRef) record.Record {
		return record.Record{Seq: seq, Kind: k, Block: blk(n), TxID: hashOf('t', 9, n, uint64(seq)), TxIndex: int(seq),
			Contract: id, Payload: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, seq))}
	}
	commit(t, b, &history.CommitParams{
		Records: []record.Record{
			rec(1, 1, record.KindContractCreated, &c1),
			rec(2, 1, record.KindContractCreated, &c2),
			rec(3, 2, record.KindContractCreated, &c3),
			rec(4, 2, record.KindInputsApplied, &c1),
			rec(5, 2, record.KindApplyInputsRejected, nil), // a failed creation
			rec(6, 3, record.KindApplyInputsRejected, &c4), // a contract the index does not know
			rec(7, 3, record.KindInputsApplied, &c3),
			rec(8, 3, record.KindPayoutWithdrawn, &c2),
		},
		Contracts: []record.ContractIndex{
			{ID: c1, Version: "v1", RolesCurrency: curA, Tags: []string{"alpha"}, CreatedSeq: 1, Block: blk(1),
				Parties: []record.Party{{Address: "addr1"}, {RoleCurrency: curA, Role: []byte("buyer")}}},
			{ID: c2, Version: "v1", Tags: []string{"beta"}, CreatedSeq: 2, Block: blk(1),
				Parties: []record.Party{{Address: "addr2"}}},
			{ID: c3, Version: "v1", RolesCurrency: curB, Tags: []string{"alpha", "beta"}, CreatedSeq: 3, Block: blk(2),
				Parties: []record.Party{{RoleCurrency: curB, Role: []byte("seller")}}},
		},
		PartyAdditions: []history.PartyAddition{{Contract: c3, Seq: 7, Parties: []record.Party{{Address: "addr1"}}}},
	})
	marker := record.Record{Seq: 9, Kind: record.KindRolledBack, Block: blk(2), Payload: json.RawMessage(`{}`)}
	commit(t, b, &history.CommitParams{
		Records: []record.Record{marker, rec(10, 3, record.KindInputsApplied, &c1)},
		Marks:   []history.RollbackMark{{MarkerSeq: 9, To: blk(2).Point()}},
	})
	role := func(cur []byte, name string) record.RoleRef {
		return record.RoleRef{Currency: cur, Name: []byte(name)}
	}
	kinds := func(ks ...record.Kind) []record.Kind { return ks }
	for _, tc := range []struct {
		name         string
		f            record.Filter
		log, current []int64 // ModeLog; ModeSnapshot at 10
	}{
		{"everything", record.Filter{}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []int64{1, 2, 3, 4, 5, 10}},
		{"contract", record.Filter{Contracts: []chain.TxOutRef{c1}}, []int64{1, 4, 9, 10}, []int64{1, 4, 10}},
		{"unindexed contract", record.Filter{Contracts: []chain.TxOutRef{c4}}, []int64{6, 9}, nil},
		{"two contracts", record.Filter{Contracts: []chain.TxOutRef{c2, c3}}, []int64{2, 3, 7, 8, 9}, []int64{2, 3}},
		{"roles currency", record.Filter{RolesCurrency: [][]byte{curA}}, []int64{1, 4, 9, 10}, []int64{1, 4, 10}},
		{"two roles currencies", record.Filter{RolesCurrency: [][]byte{curA, curB}}, []int64{1, 3, 4, 7, 9, 10}, []int64{1, 3, 4, 10}},
		{"no roles currency", record.Filter{RolesCurrency: [][]byte{{}}}, []int64{2, 8, 9}, []int64{2}},
		{"tag", record.Filter{Tags: []string{"alpha"}}, []int64{1, 3, 4, 7, 9, 10}, []int64{1, 3, 4, 10}},
		{"other tag", record.Filter{Tags: []string{"beta"}}, []int64{2, 3, 7, 8, 9}, []int64{2, 3}},
		{"unknown tag", record.Filter{Tags: []string{"omega"}}, []int64{9}, nil},
		{"party address (and an added one)", record.Filter{PartyAddress: []string{"addr1"}}, []int64{1, 3, 4, 7, 9, 10}, []int64{1, 3, 4, 10}},
		{"party address", record.Filter{PartyAddress: []string{"addr2"}}, []int64{2, 8, 9}, []int64{2}},
		{"party role", record.Filter{PartyRole: []record.RoleRef{role(curB, "seller")}}, []int64{3, 7, 9}, []int64{3}},
		{"role of another currency", record.Filter{PartyRole: []record.RoleRef{role(curA, "seller")}}, []int64{9}, nil},
		{"role name of another contract", record.Filter{PartyRole: []record.RoleRef{role(curB, "buyer")}}, []int64{9}, nil},
		{"address or role", record.Filter{PartyAddress: []string{"addr2"}, PartyRole: []record.RoleRef{role(curB, "seller")}},
			[]int64{2, 3, 7, 8, 9}, []int64{2, 3}},
		{"roles currency and tag and (address or role)", record.Filter{RolesCurrency: [][]byte{curB}, Tags: []string{"beta"},
			PartyAddress: []string{"addr2"}, PartyRole: []record.RoleRef{role(curB, "seller")}}, []int64{3, 7, 9}, []int64{3}},
		{"roles currency and tag", record.Filter{RolesCurrency: [][]byte{curA}, Tags: []string{"beta"}}, []int64{9}, nil},
		{"kind", record.Filter{Kinds: kinds(record.KindInputsApplied)}, []int64{4, 7, 10}, []int64{4, 10}},
		{"markers only", record.Filter{Kinds: kinds(record.KindRolledBack)}, []int64{9}, nil},
		{"rejections", record.Filter{Kinds: kinds(record.KindApplyInputsRejected)}, []int64{5, 6}, []int64{5}},
		{"kinds and contract", record.Filter{Kinds: kinds(record.KindInputsApplied, record.KindRolledBack), Contracts: []chain.TxOutRef{c1}},
			[]int64{4, 9, 10}, []int64{4, 10}},
		{"kind without markers and tag", record.Filter{Kinds: kinds(record.KindContractCreated), Tags: []string{"beta"}},
			[]int64{2, 3}, []int64{2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, page := range []int{1, 2, 1000} {
				got := seqs(readAll(t, b, record.RecordListParams{Filter: tc.f}, page))
				if !slices.Equal(got, tc.log) {
					t.Fatalf("log, pages of %d: %v, want %v", page, got, tc.log)
				}
				got = seqs(readAll(t, b, record.RecordListParams{Filter: tc.f, Mode: record.ModeSnapshot, Snapshot: 10}, page))
				if !slices.Equal(got, tc.current) {
					t.Fatalf("snapshot at 10, pages of %d: %v, want %v", page, got, tc.current)
				}
			}
			// Before the rollback, everything up to 8 was current.
			var want []int64
			for _, seq := range tc.log {
				if seq <= 8 {
					want = append(want, seq)
				}
			}
			got := seqs(readAll(t, b, record.RecordListParams{Filter: tc.f, Mode: record.ModeSnapshot, Snapshot: 8}, 3))
			if !slices.Equal(got, want) {
				t.Fatalf("snapshot at 8: %v, want %v", got, want)
			}
		})
	}
}

// modelFilters are filters over the generated chain's attributes.
func modelFilters(w *writer) []record.Filter {
	cur1, cur2, cur3 := currencies[1], currencies[2], currencies[3]
	role := func(cur []byte, name []byte) record.RoleRef { return record.RoleRef{Currency: cur, Name: name} }
	buyer, seller, mediator := roleNames[0], roleNames[1], roleNames[2]
	var some []chain.TxOutRef
	for _, r := range w.log {
		if r.Kind == record.KindContractCreated && len(some) < 3 && r.Seq%3 == 0 {
			some = append(some, *r.Contract)
		}
	}
	return []record.Filter{
		{},
		{Contracts: some},
		{Contracts: some[:1], Tags: []string{"alpha", "beta"}},
		{RolesCurrency: [][]byte{cur1}},
		{RolesCurrency: [][]byte{cur2, cur3}},
		{RolesCurrency: [][]byte{{}}},
		{Tags: []string{"alpha"}},
		{Tags: []string{"beta", "gamma"}},
		{PartyAddress: []string{address(1)}},
		{PartyAddress: []string{address(100), address(105), address(2)}},
		{PartyRole: []record.RoleRef{role(cur1, buyer)}},
		{PartyRole: []record.RoleRef{role(cur2, seller), role(cur3, mediator)}},
		{PartyAddress: []string{address(2)}, PartyRole: []record.RoleRef{role(cur1, seller)}},
		{RolesCurrency: [][]byte{cur1, cur2}, Tags: []string{"alpha"}, PartyAddress: []string{address(3)},
			PartyRole: []record.RoleRef{role(cur2, buyer)}},
		{Kinds: []record.Kind{record.KindInputsApplied}},
		{Kinds: []record.Kind{record.KindRolledBack}},
		{Kinds: []record.Kind{record.KindContractCreated, record.KindRolledBack}, Tags: []string{"delta"}},
		{Kinds: []record.Kind{record.KindPayoutWithdrawn}, RolesCurrency: [][]byte{cur3}},
		{Kinds: []record.Kind{record.KindApplyInputsRejected, record.KindPayoutWithdrawn}},
	}
}

func (s *suite) testFiltersModel(t *testing.T) {
	b := s.backend(t)
	w := newWriter(t, b, 11, 0)
	for i := range 30 {
		w.grow(10)
		if i%3 == 1 {
			w.rollBack(1 + i%4)
		}
		w.flush()
	}
	snaps := []int64{w.head, w.heads[len(w.heads)/2], w.heads[3]}
	// Backends may plan a filter matching few contracts differently from
	// one matching many: the filters cover both.
	fewest, most := len(w.index), 0
	for _, f := range modelFilters(w) {
		if f.IsAll() || len(f.Kinds) > 0 {
			continue
		}
		n := 0
		for _, idx := range w.index {
			r := record.Record{Kind: record.KindInputsApplied, Contract: &idx.ID}
			if f.Matches(&r, idx) {
				n++
			}
		}
		fewest, most = min(fewest, n), max(most, n)
	}
	if fewest > 5 || most < 100 {
		t.Fatalf("the filters match from %d to %d of %d contracts; want some 5 or fewer and some 100 or more",
			fewest, most, len(w.index))
	}
	t.Logf("%d records; the filters match from %d to %d of %d contracts", len(w.log), fewest, most, len(w.index))
	for i, f := range modelFilters(w) {
		checkRecords(t, fmt.Sprintf("filter %d %+v, log", i, f),
			readAll(t, b, record.RecordListParams{Filter: f}, 23), w.matching(&f, w.log))
		for _, s := range snaps {
			checkRecords(t, fmt.Sprintf("filter %d %+v, snapshot at %d", i, f, s),
				readAll(t, b, record.RecordListParams{Filter: f, Mode: record.ModeSnapshot, Snapshot: s}, 23),
				w.matching(&f, w.current(s)))
		}
		if reflect.DeepEqual(f, record.Filter{}) {
			continue
		}
		if got := w.matching(&f, w.log); len(got) == len(w.log) || len(got) == 0 {
			t.Fatalf("filter %d %+v selects %d of %d records: a useless test case", i, f, len(got), len(w.log))
		}
	}
}
