package historytest

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/history/record"
)

// bulkBlock makes a block of n records about contracts (created in the
// block when it is the first one): fast to generate in large numbers.
func bulkBlock(prev chain.BlockHeader, fork uint64, n int, contracts []chain.TxOutRef) genBlock {
	h := chain.BlockHeader{Slot: prev.Slot + 2, BlockNo: prev.BlockNo + 1, Hash: hashOf('B', fork, prev.BlockNo+1, 0)}
	blk := genBlock{Header: h, Changes: classify.UTxOChanges{Block: h}}
	for i := range n {
		id := contracts[(int(h.BlockNo)*7+i)%len(contracts)]
		kind := record.KindInputsApplied
		if h.BlockNo == 1 && i < len(contracts) {
			id = contracts[i]
			kind = record.KindContractCreated
			blk.Contracts = append(blk.Contracts, record.ContractIndex{ID: id, Version: "v1",
				RolesCurrency: currencies[i%len(currencies)], Tags: []string{tagNames[i%len(tagNames)]},
				Parties: []record.Party{{Address: address(i % 5)}}, CreatedSeq: int64(i), Block: h})
		}
		blk.Records = append(blk.Records, record.Record{Kind: kind, Block: h, TxID: hashOf('T', fork, h.BlockNo, uint64(i)),
			TxIndex: i, Contract: &id,
			Payload: json.RawMessage(fmt.Sprintf(`{"block":%d,"tx":%d,"inputs":[{"deposit":%d,"into":"role%d"}]}`,
				h.BlockNo, i, 1000+i, i%3))})
	}
	return blk
}

// bulkContracts returns n contract ids.
func bulkContracts(n int) []chain.TxOutRef {
	out := make([]chain.TxOutRef, n)
	for i := range out {
		out[i] = chain.TxOutRef{TxID: hashOf('C', 0, 0, uint64(i)), Index: uint32(i % 3)}
	}
	return out
}

// fillBulk writes blocks of perBlock records, blocksPerCommit blocks a
// commit, rolling the last few blocks back every fifth commit, until the
// log holds at least n records.
func fillBulk(w *writer, n, perBlock, blocksPerCommit int) {
	contracts := bulkContracts(40)
	commits := 0
	for w.head < int64(n) {
		for range blocksPerCommit {
			if w.head >= int64(n) {
				break
			}
			blk := bulkBlock(w.tipHeader(), w.fork, min(perBlock, n-int(w.head)), contracts)
			w.forward(blk, &genState{Header: blk.Header})
		}
		commits++
		if commits%5 == 0 && len(w.chain) > 4 && w.head < int64(n) {
			w.rollBack(2)
		}
		w.flush()
	}
}

// testPaging checks keyset pagination: pages of 97 equal one big read, in
// both modes, with and without a filter, and the page-size limits.
func (s *suite) testPaging(t *testing.T) {
	b := s.backend(t)
	w := newWriter(t, b, 51, 0)
	fillBulk(w, 10000, 100, 10)
	if w.head != 10000 {
		t.Fatalf("head %d, want 10000", w.head)
	}
	tag := record.Filter{Tags: []string{"beta"}}
	for _, p := range []record.RecordListParams{
		{},
		{Mode: record.ModeSnapshot, Snapshot: w.head},
		{Mode: record.ModeSnapshot, Snapshot: w.heads[len(w.heads)/2]},
		{Filter: tag},
		{Filter: tag, Mode: record.ModeSnapshot, Snapshot: w.head},
	} {
		what := fmt.Sprintf("%+v", p)
		p.Limit = maxPage
		big, err := b.RecordList(t.Context(), &p)
		if err != nil {
			t.Fatalf("%s: one read: %v", what, err)
		}
		want := w.log
		if p.Mode == record.ModeSnapshot {
			want = w.current(p.Snapshot)
		}
		checkRecords(t, what+" one read", big, w.matching(&p.Filter, want))
		checkRecords(t, what+" pages of 97", readAll(t, b, p, 97), big)
	}
	// The limit defaults to 1,000 and is capped at 10,000.
	for limit, want := range map[int]int{0: 1000, -5: 1000, 1: 1, maxPage: maxPage, 5 * maxPage: maxPage} {
		recs, err := b.RecordList(t.Context(), &record.RecordListParams{Limit: limit})
		if err != nil || len(recs) != want {
			t.Fatalf("limit %d: %d records, %v; want %d", limit, len(recs), err, want)
		}
	}
	recs, err := b.RecordList(t.Context(), &record.RecordListParams{After: w.head})
	if err != nil || len(recs) != 0 {
		t.Fatalf("after the head: %d records, %v", len(recs), err)
	}
}

// maxPage is the backends' cap on RecordListParams.Limit.
const maxPage = 10000

// LargeEnv names the environment variable that sets the size of the large
// history test (default 200,000 records; 20,000 with -short or the race
// detector).
const LargeEnv = "MARLOWE_TEST_LARGE_RECORDS"

// testLarge writes a large history and pages through it in both modes.
func (s *suite) testLarge(t *testing.T) {
	n := 200_000
	if testing.Short() || raceEnabled {
		n = 20_000
	}
	if v := os.Getenv(LargeEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			t.Fatalf("%s=%q: want a number of records of at least 1000", LargeEnv, v)
		}
	}
	b := s.backend(t)
	w := newWriter(t, b, 61, 0)
	start := time.Now()
	fillBulk(w, n, 100, 100)
	wrote := time.Since(start)
	start = time.Now()
	checkRecords(t, "log", readAll(t, b, record.RecordListParams{}, maxPage), w.log)
	read := time.Since(start)
	mid := w.heads[len(w.heads)/2]
	checkRecords(t, "snapshot at the middle", readAll(t, b, record.RecordListParams{Mode: record.ModeSnapshot, Snapshot: mid}, 5000),
		w.current(mid))
	one := record.Filter{Contracts: bulkContracts(40)[7:8]}
	checkRecords(t, "one contract's log", readAll(t, b, record.RecordListParams{Filter: one}, 1000), w.matching(&one, w.log))
	checkRecords(t, "one contract's current records",
		readAll(t, b, record.RecordListParams{Filter: one, Mode: record.ModeSnapshot, Snapshot: w.head}, 1000),
		w.matching(&one, w.current(w.head)))
	t.Logf("%d records: written in %v (%.0f records/s), read back in pages of %d in %v (%.0f records/s)",
		w.head, wrote, float64(w.head)/wrote.Seconds(), maxPage, read, float64(w.head)/read.Seconds())
}
