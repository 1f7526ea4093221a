package wire

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// TestRecordEncodingMatchesEncodingJSON holds appendRecord to what
// encoding/json makes of a history.Record: a field added to Record fails
// here until the encoder knows it.
func TestRecordEncodingMatchesEncodingJSON(t *testing.T) {
	rb := int64(77)
	ref := chain.TxOutRef{Index: 3}
	ref.TxID[0], ref.TxID[31] = 0xab, 0x01
	recs := []record.Record{
		{Seq: 1, Kind: record.KindContractCreated, Block: chain.BlockHeader{Slot: 10, BlockNo: 2}, TxIndex: 4,
			Contract: &ref, Payload: json.RawMessage(`{"a":[1,2,{"b":"\u00e9\"x"}],"n":null}`)},
		{Seq: 9_000_000_000, Kind: record.KindRolledBack, Payload: json.RawMessage(`{"to":{"slot":5,"hash":"00"}}`), RolledBackBy: &rb},
		{Seq: 3, Kind: record.KindInputsApplied},
		{Seq: 4, Kind: record.KindInputsApplied, Payload: json.RawMessage(`{"t":"<a&b>"}`)},
	}
	recs[0].Block.Hash[5] = 0xff
	recs[0].TxID[1] = 0x10
	// A rollback is about no transaction: no txId, no txIndex.
	if b := AppendRecord(nil, &recs[1]); bytes.Contains(b, []byte("txId")) || bytes.Contains(b, []byte("txIndex")) {
		t.Fatalf("rolled_back record %s", b)
	}
	for _, r := range recs {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&r); err != nil {
			t.Fatal(err)
		}
		got := AppendRecord(nil, &r)
		if string(got) != string(bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Fatalf("got  %s\nwant %s", got, want.Bytes())
		}
	}
	// A batch frame is the JSON of a protocol.Frame.
	frame := BatchFrame("s\"1", 4, record.Cursor{Snapshot: 9, Seq: 3}, []byte(`{"slot":1,"blockNo":2,"seq":9}`), true, recs)
	var f protocol.Frame
	if err := json.Unmarshal(frame, &f); err != nil {
		t.Fatalf("%s: %v", frame, err)
	}
	if f.Type != protocol.TypeBatch || f.Stream != "s\"1" || f.Batch != 4 || f.Cursor != "9:3" || !f.Redelivered ||
		f.Tip.Seq != 9 || len(f.Records) != len(recs) || f.Records[1].Seq != 9_000_000_000 || *f.Records[1].RolledBackBy != 77 {
		t.Fatalf("%+v", f)
	}
}

// TestFrameBuffersArePooled: a written batch frame's buffer is reused.
func TestFrameBuffersArePooled(t *testing.T) {
	recs := []record.Record{{Seq: 1, Kind: record.KindInputsApplied, Payload: json.RawMessage(`{}`)}}
	a := BatchFrame("s", 1, record.Cursor{Seq: 1}, []byte(`{}`), false, recs)
	want := string(a)
	PutFrameBuf(a)
	b := BatchFrame("s", 1, record.Cursor{Seq: 1}, []byte(`{}`), false, recs)
	if string(b) != want {
		t.Fatalf("%s != %s", b, want)
	}
	if big := GetFrameBuf(MaxPooledFrame + 1); cap(big) <= MaxPooledFrame {
		t.Fatal("a large buffer from the pool")
	}
}

// TestFramePartsCursorAfter: the cursor after each record of the batch a
// frame carries, in a snapshot and in the log.
func TestFramePartsCursorAfter(t *testing.T) {
	f := &FrameParts{Records: []record.Record{{Seq: 3}, {Seq: 9}, {Seq: 12}}, Snapshot: 9, Cursor: record.Cursor{Seq: 12}}
	want := []record.Cursor{{Snapshot: 9, Seq: 3}, {Snapshot: 9, Seq: 9}, {Seq: 12}}
	for i, w := range want {
		if got := f.CursorAfter(i); got != w {
			t.Fatalf("after record %d: %v, want %v", i, got, w)
		}
	}
}

// TestCursorAfter: the cursor after each record of a batch, in a snapshot,
// in the log, and for log records read from a snapshot cursor whose
// snapshot turned out to be complete.
func TestCursorAfter(t *testing.T) {
	recs := func(seqs ...int64) []record.Record {
		var out []record.Record
		for _, s := range seqs {
			out = append(out, record.Record{Seq: s})
		}
		return out
	}
	for _, tc := range []struct {
		recs     []record.Record
		snapshot int64
		end      record.Cursor
		want     []string
	}{
		{recs(2, 5, 9), 10, record.Cursor{Snapshot: 10, Seq: 9}, []string{"10:2", "10:5", "10:9"}},
		{recs(2, 5), 10, record.Cursor{Seq: 10}, []string{"10:2", "10"}},
		{recs(12, 15, 20), 10, record.Cursor{Seq: 22}, []string{"12", "15", "22"}},
		{recs(12, 15), 0, record.Cursor{Seq: 15}, []string{"12", "15"}},
	} {
		for i, w := range tc.want {
			c := CursorAfter(tc.recs, tc.snapshot, tc.end, i)
			if c.String() != w {
				t.Errorf("%v in snapshot %d, end %s, record %d: %s, want %s", tc.recs, tc.snapshot, tc.end, i, c, w)
			}
			if _, err := record.ParseCursor(c.String()); err != nil {
				t.Error(err)
			}
		}
	}
}
