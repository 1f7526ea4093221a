package historytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// show formats a record for a failure message.
func show(r *record.Record) string {
	c, rb := "-", "-"
	if r.Contract != nil {
		c = r.Contract.String()[:8]
	}
	if r.RolledBackBy != nil {
		rb = fmt.Sprint(*r.RolledBackBy)
	}
	return fmt.Sprintf("{seq %d %s slot %d block %d tx %d contract %s rolledBackBy %s payload %s}",
		r.Seq, r.Kind, r.Block.Slot, r.Block.BlockNo, r.TxIndex, c, rb, r.Payload)
}

// testRecords checks appending and reading back, seq continuity and the
// refusals that leave the store as it was.
func (s *suite) testRecords(t *testing.T) {
	runParts(t, []part{
		{"append and read back", s.testRecordsAppendAndReadBack},
		{"seq continuity", s.testRecordsSeqContinuity},
		{"refusals", s.testRecordsRefusals},
		{"recent", s.testRecordsRecent},
		{"closed", s.testRecordsClosed},
		{"cancelled", s.testRecordsCancelled},
	})
}

// testRecordsAppendAndReadBack: records come back as appended, payloads byte for
// byte, by list and by seq.
func (s *suite) testRecordsAppendAndReadBack(t *testing.T) {
	b := s.backend(t)
	w := newWriter(t, b, 3, 0)
	w.extend(40)
	// Payloads come back byte for byte; an empty one as JSON null.
	hdr := chain.BlockHeader{Slot: w.tipHeader().Slot + 5, BlockNo: w.tipHeader().BlockNo + 1, Hash: hashOf('x', 1, 2, 3)}
	payloads := []string{"", `{}`, `  { "a" :1 }  `, `"\u00e9\ud83d\ude00 é"`, `1e400`, `[null]`, "{\n\t\"deep\": [[[[{}]]]]\n}"}
	blk := genBlock{Header: hdr}
	for i, p := range payloads {
		blk.Records = append(blk.Records, record.Record{Kind: record.KindApplyInputsRejected, Block: hdr,
			TxID: hashOf('y', 0, 0, uint64(i)), TxIndex: i, Payload: json.RawMessage(p)})
	}
	w.forward(blk, &genState{Header: hdr})
	w.flush()
	w.log[len(w.log)-len(payloads)].Payload = json.RawMessage("null")
	w.checkLog(t, "log")
	for _, want := range w.log {
		got, err := b.RecordGet(t.Context(), want.Seq)
		if err != nil {
			t.Fatalf("record get %d: %v", want.Seq, err)
		}
		if !recordEqual(got, &want) {
			t.Fatalf("record get %d: %s, want %s", want.Seq, show(got), show(&want))
		}
	}
	for _, seq := range []int64{0, -1, w.head + 1} {
		_, err := b.RecordGet(t.Context(), seq)
		wantErr(t, fmt.Sprintf("record get %d", seq), err, record.ErrNotFound)
	}
	if head, err := b.Head(t.Context()); err != nil || head != w.head {
		t.Fatalf("head %d, %v; want %d", head, err, w.head)
	}
	recs, err := b.RecordList(t.Context(), &record.RecordListParams{})
	if err != nil || len(recs) != min(1000, len(w.log)) {
		t.Fatalf("default page: %d records, %v", len(recs), err)
	}
	recs, err = b.RecordList(t.Context(), &record.RecordListParams{After: 5, UpTo: 17, Limit: 100})
	checkRecords(t, "UpTo", recs, w.log[5:17])
	if err != nil {
		t.Fatal(err)
	}
}

// testRecordsSeqContinuity: a batch whose seqs do not continue the log is
// refused whole.
func (s *suite) testRecordsSeqContinuity(t *testing.T) {
	b := s.backend(t)
	w := newWriter(t, b, 4, 0)
	hdr := chain.BlockHeader{Slot: 1e6, BlockNo: 1e5, Hash: hashOf('z', 0, 0, 0)}
	bad := func(what string, seqs ...int64) {
		t.Helper()
		id := chain.TxOutRef{TxID: hashOf('z', 1, 0, 0)}
		p := &history.CommitParams{
			Contracts:  []record.ContractIndex{{ID: id, Version: "v1", CreatedSeq: seqs[0], Block: hdr}},
			Checkpoint: history.CheckpointUpdate{Breadcrumbs: []chain.BlockHeader{hdr}},
		}
		for _, seq := range seqs {
			p.Records = append(p.Records, record.Record{Seq: seq, Kind: record.KindContractCreated, Block: hdr,
				Contract: &id, Payload: json.RawMessage(`{}`)})
		}
		wantErr(t, what, b.Commit(t.Context(), p), record.ErrSeqMismatch)
		// Nothing of the refused batch was written.
		if head, err := b.Head(t.Context()); err != nil || head != w.head {
			t.Fatalf("%s: head %d, %v after the refusal; want %d", what, head, err, w.head)
		}
		_, err := b.ContractGet(t.Context(), id)
		wantErr(t, what+": contract of the refused batch", err, record.ErrNotFound)
		w.checkLog(t, what)
		if w.head > 0 {
			checkCheckpoint(t, b, w.checkpoint())
		} else if cp, err := b.CheckpointGet(t.Context()); err != nil || len(cp.Breadcrumbs) != 0 {
			t.Fatalf("%s: checkpoint %+v, %v after the refusal", what, cp, err)
		}
	}
	bad("first seq 2 on an empty log", 2, 3)
	bad("first seq 0 on an empty log", 0, 1)
	w.extend(10)
	h := w.head
	bad("a gap after the head", h+2, h+3)
	bad("an overlap with the head", h, h+1)
	bad("a gap inside the batch", h+1, h+3)
	bad("a repeated seq inside the batch", h+1, h+1)
	bad("a batch out of order", h+2, h+1)
	// The log still continues from its head.
	w.extend(5)
	w.checkLog(t, "log")
}

// testRecordsRefusals: a batch refused for its content leaves nothing
// behind, and the next one goes through.
func (s *suite) testRecordsRefusals(t *testing.T) {
	b := s.backend(t)
	w := newWriter(t, b, 5, 0)
	w.extend(5)
	head := w.head
	rec := record.Record{Seq: head + 1, Kind: record.KindInputsApplied, Block: w.tipHeader(), Payload: json.RawMessage(`{"a":`)}
	for what, p := range map[string]*history.CommitParams{
		"payload not JSON": {Records: []record.Record{rec}},
		"unknown kind":     {Records: []record.Record{{Seq: head + 1, Kind: "created", Payload: json.RawMessage(`{}`)}}},
		"empty UTxO step":  {Checkpoint: history.CheckpointUpdate{UTxO: []history.UTxOStep{{}}}},
		"party addition to an unknown contract": {PartyAdditions: []history.PartyAddition{
			{Contract: chain.TxOutRef{Index: 7}, Seq: head, Parties: []record.Party{{Address: "addr_x"}}}}},
		"mark beyond the head": {Marks: []history.RollbackMark{{MarkerSeq: head + 1}}},
	} {
		p.Checkpoint.Breadcrumbs = []chain.BlockHeader{{Slot: 1e9, BlockNo: 1e6}}
		if err := b.Commit(t.Context(), p); err == nil {
			t.Fatalf("%s: commit accepted", what)
		}
		w.checkLog(t, what)
		checkCheckpoint(t, b, w.checkpoint())
	}
	// A refused commit is not a broken store: the next one goes through.
	w.extend(3)
	w.checkLog(t, "log after the refusals")
}

// testRecordsRecent: RecordRecent lists every record of the blocks after a
// slot, markers and rolled-back ones too.
func (s *suite) testRecordsRecent(t *testing.T) {
	b := s.backend(t)
	w := newWriter(t, b, 6, 0)
	w.play(30, -4, 6, 0, -2, 0)
	for _, after := range []uint64{0, w.chain[10].Header.Slot, w.chain[25].Header.Slot, w.tipHeader().Slot + 100} {
		got, err := b.RecordRecent(t.Context(), after)
		if err != nil {
			t.Fatalf("record recent after slot %d: %v", after, err)
		}
		var want []record.RecordRef
		for _, r := range w.log {
			if r.Block.Slot > after {
				want = append(want, record.RecordRef{Seq: r.Seq, Slot: r.Block.Slot, Kind: r.Kind,
					Contract: r.Contract, RolledBackBy: r.RolledBackBy})
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("record recent after slot %d: %d refs, want %d\n got %+v\nwant %+v", after, len(got), len(want), got, want)
		}
	}
}

// testRecordsClosed: every call after Close fails with ErrBackendClosed.
func (s *suite) testRecordsClosed(t *testing.T) {
	b := s.backend(t)
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	ctx := context.Background()
	_, err := b.Head(ctx)
	wantErr(t, "head after close", err, record.ErrBackendClosed)
	_, err = b.RecordList(ctx, &record.RecordListParams{})
	wantErr(t, "record list after close", err, record.ErrBackendClosed)
	wantErr(t, "commit after close", b.Commit(ctx, &history.CommitParams{}), record.ErrBackendClosed)
	_, err = b.CheckpointGet(ctx)
	wantErr(t, "checkpoint after close", err, record.ErrBackendClosed)
}

// testRecordsCancelled: a read with a cancelled context says so.
func (s *suite) testRecordsCancelled(t *testing.T) {
	b := s.backend(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := b.RecordList(ctx, &record.RecordListParams{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("record list with a cancelled context: %v", err)
	}
}

// testContracts checks the contract index: creation, re-creation on a
// fork, party additions, and that nothing is ever removed.
func (s *suite) testContracts(t *testing.T) {
	b := s.backend(t)
	ctx := t.Context()
	id := chain.TxOutRef{TxID: hashOf('c', 1, 1, 1), Index: 2}
	cur := currencies[1]
	h5 := chain.BlockHeader{Slot: 50, BlockNo: 5, Hash: hashOf('b', 0, 0, 5)}
	h6 := chain.BlockHeader{Slot: 60, BlockNo: 6, Hash: hashOf('b', 0, 0, 6)}
	h7 := chain.BlockHeader{Slot: 70, BlockNo: 7, Hash: hashOf('b', 1, 0, 7)}
	rec := func(seq int64, h chain.BlockHeader, k record.Kind) record.Record {
		return record.Record{Seq: seq, Kind: k, Block: h, TxID: hashOf('t', 0, h.BlockNo, 0), Contract: &id, Payload: json.RawMessage(`{}`)}
	}
	created := record.ContractIndex{ID: id, Version: "v3", RolesCurrency: cur, Tags: []string{"beta", "alpha"},
		Parties: []record.Party{{Address: "addr_a"}, {RoleCurrency: cur, Role: []byte("buyer")}}, CreatedSeq: 1, Block: h6}
	// The creation, and the same contract listed twice in one batch: the
	// last entry wins, tags and parties are the union.
	twice := created
	twice.Tags, twice.Parties = []string{"gamma"}, []record.Party{{Address: "addr_b"}}
	commit(t, b, &history.CommitParams{
		Records:        []record.Record{rec(1, h6, record.KindContractCreated), rec(2, h6, record.KindInputsApplied)},
		Contracts:      []record.ContractIndex{created, twice},
		PartyAdditions: []history.PartyAddition{{Contract: id, Seq: 2, Parties: []record.Party{{Address: "addr_c"}, {Address: "addr_a"}}}},
	})
	want := created
	want.Tags = []string{"alpha", "beta", "gamma"}
	want.Parties = []record.Party{{Address: "addr_a"}, {RoleCurrency: cur, Role: []byte("buyer")}, {Address: "addr_b"}, {Address: "addr_c"}}
	checkContract(t, b, &want)
	// A later addition in its own batch.
	commit(t, b, &history.CommitParams{
		Records:        []record.Record{rec(3, h6, record.KindInputsApplied)},
		PartyAdditions: []history.PartyAddition{{Contract: id, Seq: 3, Parties: []record.Party{{RoleCurrency: cur, Role: []byte("seller")}}}},
	})
	want.Parties = append(want.Parties, record.Party{RoleCurrency: cur, Role: []byte("seller")})
	checkContract(t, b, &want)
	// Rolled back to block 5 and created again in block 7 of the fork: the
	// entry keeps everything and takes the new seq and block.
	marker := record.Record{Seq: 4, Kind: record.KindRolledBack, Block: h5, Payload: json.RawMessage(`{}`)}
	again := created
	again.CreatedSeq, again.Block, again.Tags = 5, h7, []string{"delta"}
	commit(t, b, &history.CommitParams{
		Records:   []record.Record{marker, rec(5, h7, record.KindContractCreated)},
		Marks:     []history.RollbackMark{{MarkerSeq: 4, To: h5.Point()}},
		Contracts: []record.ContractIndex{again},
	})
	want.CreatedSeq, want.Block, want.Tags = 5, h7, []string{"alpha", "beta", "delta", "gamma"}
	checkContract(t, b, &want)
	_, err := b.ContractGet(ctx, chain.TxOutRef{TxID: id.TxID, Index: 3})
	wantErr(t, "contract get of an unknown contract", err, record.ErrNotFound)
	// A contract without roles reads back without a roles currency.
	plain := record.ContractIndex{ID: chain.TxOutRef{Index: 9}, Version: "v1", CreatedSeq: 6, Block: h7}
	commit(t, b, &history.CommitParams{Records: []record.Record{rec(6, h7, record.KindContractCreated)},
		Contracts: []record.ContractIndex{plain}})
	checkContract(t, b, &plain)
}

// commit commits p or fails.
func commit(t *testing.T, b history.Backend, p *history.CommitParams) {
	t.Helper()
	if err := b.Commit(t.Context(), p); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// checkContract compares an index entry with want: tags as sorted sets,
// parties as sets.
func checkContract(t *testing.T, b history.Backend, want *record.ContractIndex) {
	t.Helper()
	got, err := b.ContractGet(t.Context(), want.ID)
	if err != nil {
		t.Fatalf("contract get %s: %v", want.ID, err)
	}
	norm := func(c record.ContractIndex) record.ContractIndex {
		c.Tags = slices.Sorted(slices.Values(c.Tags))
		c.Parties = slices.Clone(c.Parties)
		slices.SortFunc(c.Parties, func(a, b record.Party) int {
			return strings.Compare(fmt.Sprintf("%s|%x|%x", a.Address, a.RoleCurrency, a.Role), fmt.Sprintf("%s|%x|%x", b.Address, b.RoleCurrency, b.Role))
		})
		if len(c.RolesCurrency) == 0 {
			c.RolesCurrency = nil
		}
		return c
	}
	g, w := norm(*got), norm(*want)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("contract %s:\n got %+v\nwant %+v", want.ID, g, w)
	}
}
