package streaming_test

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/client"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// TestPartialAck: an ack with upToSeq acknowledges the batch's records up
// to that seq; the others come at once in a new batch (redelivered), and a
// durable stream resumes after the last record acknowledged, in the
// snapshot and in the log.
func TestPartialAck(t *testing.T) {
	sf := newSeedFixture(t, 40)
	want := sf.expected(t, record.Filter{}, record.Cursor{Snapshot: sf.h.Handle.Head()})
	raw := streamtest.Dial(t, sf.srv.URL, nil)
	sub := raw.Subscribe(protocol.Command{Stream: "part", Durable: true, Filter: &protocol.Filter{All: true}, BatchSize: 5})
	b1 := raw.Expect(protocol.TypeBatch, 5*time.Second)
	if len(b1.Records) != 5 {
		t.Fatalf("batch of %d", len(b1.Records))
	}
	raw.Send(&protocol.Command{Type: protocol.TypeAck, Stream: "part", Batch: b1.Batch, UpToSeq: b1.Records[1].Seq})
	b2 := raw.Expect(protocol.TypeBatch, 5*time.Second)
	if len(b2.Records) != 3 || b2.Records[0].Seq != b1.Records[2].Seq || !b2.Redelivered || b2.Cursor != b1.Cursor || b2.Batch <= b1.Batch {
		t.Fatalf("after a partial ack: %+v (first batch %+v)", b2, b1)
	}
	// The acknowledged position is the cursor right after record 2, in
	// the snapshot.
	snap, _ := record.ParseCursor(sub.Cursor)
	wantCursor := record.Cursor{Snapshot: snap.Snapshot, Seq: b1.Records[1].Seq}.String()
	in, err := sf.srv.GetStream(context.Background(), "part")
	if err != nil || in.Cursor != wantCursor || in.Records != 2 {
		t.Fatalf("stored %+v %v, want cursor %s and 2 records", in, err, wantCursor)
	}
	// An upToSeq before the batch acknowledges nothing: the batch comes again.
	raw.Send(&protocol.Command{Type: protocol.TypeAck, Stream: "part", Batch: b2.Batch, UpToSeq: 1})
	b3 := raw.Expect(protocol.TypeBatch, 5*time.Second)
	if len(b3.Records) != 3 || b3.Records[0].Seq != b2.Records[0].Seq {
		t.Fatalf("after an ack of nothing: %+v", b3)
	}
	raw.Ack(b3)
	// Resuming on another connection continues after the last ack.
	_ = raw.WS.Close(websocket.StatusNormalClosure, "") // after the server read the ack
	waitFor(t, "the connection to leave", func() bool {
		in, err := sf.srv.GetStream(context.Background(), "part")
		return err == nil && in.Connections == 0
	})
	var got streamtest.Collector
	must(t, got.Add(b1.Records[:2]))
	must(t, got.Add(b3.Records))
	raw = streamtest.Dial(t, sf.srv.URL, nil)
	raw.Subscribe(protocol.Command{Stream: "part", Durable: true})
	for len(got.Records) < len(want) {
		b := raw.Expect(protocol.TypeBatch, 5*time.Second)
		// Half of each batch: partial acks past the snapshot, too.
		k := (len(b.Records) + 1) / 2
		must(t, got.Add(b.Records[:k]))
		raw.Send(&protocol.Command{Type: protocol.TypeAck, Stream: "part", Batch: b.Batch, UpToSeq: b.Records[k-1].Seq})
	}
	if err := streamtest.Same(got.Records, want); err != nil || got.Dups != 0 {
		t.Fatalf("%v (%d duplicates)", err, got.Dups)
	}
	for _, bad := range []string{`{"type":"ack","stream":"part","batch":1,"upToSeq":-1}`, `{"type":"nack","stream":"part","batch":1,"upToSeq":3}`} {
		raw.SendText(bad)
		if f := raw.Expect(protocol.TypeError, 5*time.Second); f.Code != protocol.CodeBadRequest {
			t.Errorf("%s: %+v", bad, f)
		}
	}
	sf.noWarnings(t)
}

// TestClientAckUpTo: the Go client's AckUpTo moves an ephemeral stream's
// resume cursor to right after the record acknowledged.
func TestClientAckUpTo(t *testing.T) {
	sf := newSeedFixture(t, 30)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.New(client.Options{URL: sf.srv.URL})
	must(t, err)
	defer c.Close()
	s, err := c.Subscribe(ctx, client.Request{Stream: "e", Filter: protocol.Filter{All: true}, BatchSize: 4})
	must(t, err)
	start, _ := record.ParseCursor(s.Cursor())
	b, err := s.Next(ctx)
	must(t, err)
	must(t, s.AckUpTo(ctx, b, b.Records[1].Seq))
	if want := (record.Cursor{Snapshot: start.Snapshot, Seq: b.Records[1].Seq}).String(); s.Cursor() != want {
		t.Fatalf("cursor %s, want %s", s.Cursor(), want)
	}
	b2, err := s.Next(ctx)
	must(t, err)
	if b2.Records[0].Seq != b.Records[2].Seq {
		t.Fatalf("next batch starts at %d, want %d", b2.Records[0].Seq, b.Records[2].Seq)
	}
	must(t, s.AckUpTo(ctx, b2, b2.Records[len(b2.Records)-1].Seq))
	if s.Cursor() != b2.Cursor {
		t.Fatalf("cursor %s after a whole ack, want %s", s.Cursor(), b2.Cursor)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
