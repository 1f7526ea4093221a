package conn

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// TestFramePartsAreTheFrame: a batch frame written in parts around the
// records' shared JSON (the catch-up cache's, the record cache's near the
// head, or encoded for it) is byte for byte the frame written whole, over
// a WebSocket too, small (one write) and large (continuation frames).
func TestFramePartsAreTheFrame(t *testing.T) {
	var c wire.RecordCache
	head := int64(100_000)
	big := json.RawMessage(`{"s":"` + strings.Repeat("x", 2000) + `"}`)
	var recs []record.Record
	for i := range 60 {
		recs = append(recs, record.Record{Seq: head - 9000 + int64(i*150), Kind: record.KindInputsApplied, Payload: big})
	}
	shared := make([][]byte, len(recs))
	for i := range recs {
		if i%3 == 0 {
			shared[i] = wire.AppendRecord(nil, &recs[i])
		}
	}
	tip := []byte(`{"seq":100000}`)
	cur := record.Cursor{Snapshot: head, Seq: recs[len(recs)-1].Seq}
	for _, n := range []int{1, len(recs)} {
		want := wire.BatchFrame("s\"1", 9, cur, tip, true, recs[:n])
		f := wire.BatchFrameParts("s\"1", 9, cur, tip, true, c.SharedRecords(recs[:n], shared[:n], head))
		if got := f.AppendTo(nil); string(got) != string(want) || f.Size() != len(want) {
			t.Fatalf("%d records: parts make %d bytes (size %d), the frame %d", n, len(got), f.Size(), len(want))
		}
		var parts int
		if got := viaWebSocket(t, f, func() { parts++ }); got != string(want) {
			t.Fatalf("%d records: the message read differs from the frame (%d bytes, want %d)", n, len(got), len(want))
		}
		// A frame larger than the buffer tells its progress part by part
		// (the budget's sign of a client that reads).
		if large := f.Size() > partsBuffer; large != (parts > 0) || large && parts < f.Size()/partsBuffer {
			t.Fatalf("%d records (%d bytes): progress told %d times", n, f.Size(), parts)
		}
	}
}

// viaWebSocket writes f with writeParts and returns the message a client
// read.
func viaWebSocket(t *testing.T, f *wire.FrameParts, progress func()) string {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		if err := writeParts(ctx, ws, f, progress); err != nil {
			t.Error(err)
		}
		_, _, _ = ws.Read(ctx) // until the client is done
	}))
	defer srv.Close()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(-1)
	_, b, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
