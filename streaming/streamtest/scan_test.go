package streamtest

import (
	"encoding/json"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// TestScanBatchFrame reads a batch frame as the server encodes it: the
// records' seqs and block numbers, not the tip's, and the batch number.
func TestScanBatchFrame(t *testing.T) {
	recs := []record.Record{
		{Seq: 41, Kind: record.KindContractCreated, Block: chain.BlockHeader{Slot: 900, BlockNo: 12}, Payload: json.RawMessage(`{"blockNo":2,"n":[1,2]}`)},
		{Seq: 42, Kind: record.KindInputsApplied, Block: chain.BlockHeader{Slot: 901, BlockNo: 13}, Payload: json.RawMessage(`{}`)},
	}
	frame := wire.BatchFrame("f", 7, record.Cursor{Snapshot: 1, Seq: 42}, []byte(`{"slot":950,"blockNo":20,"seq":99}`), false, recs)
	if k := FrameKind(frame); k != "batch" {
		t.Fatalf("FrameKind = %q in %s", k, frame)
	}
	type got struct {
		seq   int64
		block uint64
	}
	var seen []got
	if n := ScanRecords(frame, func(seq int64, block uint64) { seen = append(seen, got{seq, block}) }); n != 2 {
		t.Fatalf("ScanRecords found %d records in %s: %v", n, frame, seen)
	}
	if seen[0] != (got{41, 12}) || seen[1] != (got{42, 13}) {
		t.Fatalf("ScanRecords: %v in %s", seen, frame)
	}
	if b, ok := BatchNumber(frame); !ok || b != 7 {
		t.Fatalf("BatchNumber = %d, %v in %s", b, ok, frame)
	}
	if _, ok := BatchNumber([]byte(`{"type":"subscribed","stream":"f"}`)); ok {
		t.Fatal("BatchNumber found a batch number in a subscribed frame")
	}
}

// TestScanCommandsAndKinds: the commands' texts are the protocol's
// commands, and the control frames' kinds are told apart.
func TestScanCommandsAndKinds(t *testing.T) {
	var sub, ack protocol.Command
	if err := json.Unmarshal(SubscribeAll("f", "tip"), &sub); err != nil || sub.Type != protocol.TypeSubscribe || sub.Stream != "f" || sub.From != "tip" || sub.Filter == nil || !sub.Filter.All {
		t.Fatalf("SubscribeAll: %+v, %v", sub, err)
	}
	if err := json.Unmarshal(AckText("f", 12), &ack); err != nil || ack.Type != protocol.TypeAck || ack.Stream != "f" || ack.Batch != 12 {
		t.Fatalf("AckText: %+v, %v", ack, err)
	}
	for text, want := range map[string]string{
		string(wire.ControlFrame(&protocol.Frame{Type: protocol.TypeSubscribed, Stream: "f"})): "subscribed",
		string(wire.ControlFrame(&protocol.Frame{Type: protocol.TypeError, Code: "x"})):        "error",
		`{"type":"heartbeat"}`: "",
	} {
		if got := FrameKind([]byte(text)); got != want {
			t.Errorf("FrameKind(%s) = %q, want %q", text, got, want)
		}
	}
}
