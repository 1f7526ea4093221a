package streaming_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// TestDurableLoadBalancedAcrossThreeConnections starts one durable stream
// on three connections: its batches go to them in turn, one round trip at
// a time, and together they receive every record exactly once.
func TestDurableLoadBalancedAcrossThreeConnections(t *testing.T) {
	sf := newSeedFixture(t, 300)
	start := record.Cursor{Snapshot: sf.h.Handle.Head()}
	want := sf.expected(t, record.Filter{}, start)
	cmd := protocol.Command{Stream: "lb", Durable: true, Filter: &protocol.Filter{All: true}, BatchSize: 6}

	conns := make([]*streamtest.Raw, 3)
	for i := range conns {
		conns[i] = streamtest.Dial(t, sf.srv.URL, nil)
		conns[i].Subscribe(cmd)
	}
	tr := newTurns(len(conns))
	for i, raw := range conns {
		tr.read(raw, 200*time.Millisecond, func(f *protocol.Frame, err error) {
			if err == nil && f.Type == protocol.TypeBatch {
				tr.take(t, i, raw, f, time.Millisecond)
			}
		})
	}
	waitFor(t, "every record", func() bool { return tr.records() >= len(want) })
	tr.stop()
	tr.check(t, want)
	batches := (len(want) + 5) / 6
	for i, n := range tr.per {
		// Round robin: each connection gets a third, give or take one.
		if n < batches/3-1 || n > batches/3+2 {
			t.Errorf("connection %d got %d of %d batches", i, n, batches)
		}
	}
	t.Logf("%d records in %d batches, per connection %v", len(want), batches, tr.per)
}

// TestDurableStreamSurvivesRestart acknowledges part of a durable stream,
// restarts the whole process (history store, stream store, server) with a
// batch in flight, and checks that the stream resumes after its last ack:
// the unacknowledged batch comes again, nothing acknowledged does.
func TestDurableStreamSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := streamingtest.NewHistory(t, dir, nil)
	feed, err := streamingtest.NewFeed(h, 5, 0.6, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := feed.UntilRecords(ctx, 120); err != nil {
		t.Fatal(err)
	}
	filter := &protocol.Filter{Kinds: []string{"contract_created", "inputs_applied"}}
	hf, _ := filter.History()
	streams, err := sqlstreams.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Streams: streams})
	raw := streamtest.Dial(t, srv.URL, nil)
	sub := raw.Subscribe(protocol.Command{Stream: "orders", Durable: true, Filter: filter, BatchSize: 8})
	start, _ := record.ParseCursor(sub.Cursor)
	var applied streamtest.Collector
	drain(t, raw, &applied, 40)
	inFlight := raw.Expect(protocol.TypeBatch, 5*time.Second)
	acked := applied.Last()

	// Shut down with the round trip in flight: Shutdown waits for it
	// until its context ends, then cuts it short.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if err := srv.Shutdown(short); err == nil {
		t.Fatal("shutdown with an unacknowledged round trip returned no error")
	}
	cancel()
	srv.Stop(t)
	streams.Close()
	h.Stop()

	// The next process.
	h2 := streamingtest.NewHistory(t, dir, nil)
	streams2, err := sqlstreams.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer streams2.Close()
	srv2 := streamingtest.StartServer(t, h2, streamingtest.ServerOptions{Streams: streams2})
	info, err := srv2.GetStream(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := record.ParseCursor(info.Cursor); c.Seq != acked || info.Records != int64(len(applied.Records)) {
		t.Fatalf("stored cursor %s (%d records), want seq %d (%d records)", info.Cursor, info.Records, acked, len(applied.Records))
	}
	raw2 := streamtest.Dial(t, srv2.URL, nil)
	raw2.Subscribe(protocol.Command{Stream: "orders", Durable: true})
	first := raw2.Expect(protocol.TypeBatch, 5*time.Second)
	if first.Batch <= inFlight.Batch-1 || first.Records[0].Seq != inFlight.Records[0].Seq {
		t.Fatalf("after the restart: batch %d from seq %d; the batch in flight was %d from seq %d",
			first.Batch, first.Records[0].Seq, inFlight.Batch, inFlight.Records[0].Seq)
	}
	if err := applied.Add(inFlight.Records); err != nil {
		t.Fatal(err)
	}
	if err := applied.Add(first.Records); err != nil {
		t.Fatal(err)
	}
	raw2.Ack(first)
	want, err := streamtest.Expected(ctx, h2.Backend, hf, start, h2.Handle.Head())
	if err != nil {
		t.Fatal(err)
	}
	drain(t, raw2, &applied, len(want))
	if err := streamtest.Same(applied.Records, want); err != nil {
		t.Fatal(err)
	}
	if applied.Dups > len(inFlight.Records) {
		t.Fatalf("%d duplicates: more than the batch in flight", applied.Dups)
	}
}

// TestShutdownLetsRoundTripsFinish: a batch acknowledged while the server
// drains is stored, and Shutdown returns without error.
func TestShutdownLetsRoundTripsFinish(t *testing.T) {
	sf := newSeedFixture(t, 30)
	raw := streamtest.Dial(t, sf.srv.URL, nil)
	raw.Subscribe(protocol.Command{Stream: "d", Durable: true, Filter: &protocol.Filter{All: true}, BatchSize: 5})
	f := raw.Expect(protocol.TypeBatch, 5*time.Second)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- sf.srv.Shutdown(ctx)
	}()
	// The server drains once it takes no more clients (it closes its
	// listener as it tells the streams to drain): no new batch goes out.
	waitFor(t, "the server to stop taking clients", func() bool {
		c, err := net.Dial("tcp", sf.srv.Addr().String())
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	raw.Ack(f)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	fr, err := raw.TryRead(2 * time.Second)
	for err == nil && fr.Type == protocol.TypeHeartbeat {
		fr, err = raw.TryRead(2 * time.Second)
	}
	if err == nil {
		t.Fatalf("after shutdown: %+v", fr)
	}
	rec, gerr := sf.srv.GetStream(context.Background(), "d")
	if gerr != nil || rec.Batch != f.Batch {
		t.Fatalf("stored batch %+v %v, want %d", rec, gerr, f.Batch)
	}
}

// TestDurableStreamsHandler lists, shows and deletes durable streams over
// HTTP; a deleted stream's connection is told.
func TestDurableStreamsHandler(t *testing.T) {
	sf := newSeedFixture(t, 20)
	raw := streamtest.Dial(t, sf.srv.URL, nil)
	raw.Subscribe(protocol.Command{Stream: "one", Durable: true, Filter: &protocol.Filter{All: true}, BatchSize: 1000})
	f := raw.Expect(protocol.TypeBatch, 5*time.Second)
	raw.Ack(f)
	raw2 := streamtest.Dial(t, sf.srv.URL, nil)
	raw2.Subscribe(protocol.Command{Stream: "two", Durable: true, Filter: &protocol.Filter{Tags: []string{"x"}}, Mode: protocol.ModeBroadcast})
	// A mismatching filter and mode are refused.
	raw2.Send(&protocol.Command{Type: protocol.TypeSubscribe, Stream: "one", Durable: true, Filter: &protocol.Filter{Tags: []string{"y"}}})
	if e := raw2.Expect(protocol.TypeError, 5*time.Second); e.Code != protocol.CodeStreamMismatch {
		t.Fatalf("%+v", e)
	}
	raw2.Send(&protocol.Command{Type: protocol.TypeSubscribe, Stream: "one", Durable: true, Mode: protocol.ModeBroadcast})
	if e := raw2.Expect(protocol.TypeError, 5*time.Second); e.Code != protocol.CodeStreamMismatch {
		t.Fatalf("%+v", e)
	}
	h := httptest.NewServer(sf.srv.StreamsHandler())
	defer h.Close()

	waitFor(t, "the ack to be stored", func() bool {
		in, err := sf.srv.GetStream(context.Background(), "one")
		return err == nil && in.Batch == f.Batch
	})
	var list struct {
		Streams []streaming.StreamInfo `json:"streams"`
		Tip     protocol.Tip           `json:"tip"`
	}
	getJSON(t, h.URL+"/streams", http.StatusOK, &list)
	if len(list.Streams) != 2 || list.Streams[0].Name != "one" || list.Streams[1].Name != "two" {
		t.Fatalf("list %+v", list)
	}
	one := list.Streams[0]
	if one.Connections != 1 || one.Records != int64(len(f.Records)) || one.Lag != 0 || list.Tip.Seq != sf.h.Handle.Head() {
		t.Fatalf("stream one: %+v (tip %+v)", one, list.Tip)
	}
	getJSON(t, h.URL+"/streams?limit=1&after=one", http.StatusOK, &list)
	if len(list.Streams) != 1 || list.Streams[0].Name != "two" || list.Streams[0].Mode != protocol.ModeBroadcast {
		t.Fatalf("page %+v", list)
	}
	getJSON(t, h.URL+"/streams/nope", http.StatusNotFound, nil)
	req, _ := http.NewRequest(http.MethodDelete, h.URL+"/streams/one", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %v %v", resp, err)
	}
	resp.Body.Close()
	if e := raw.Expect(protocol.TypeError, 5*time.Second); e.Code != protocol.CodeStreamDeleted || e.Stream != "one" {
		t.Fatalf("after delete: %+v", e)
	}
	getJSON(t, h.URL+"/streams/one", http.StatusNotFound, nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("second delete: %v %v", resp, err)
	}
	resp.Body.Close()
	// The name starts over.
	sub := raw.Subscribe(protocol.Command{Stream: "one", Durable: true, Filter: &protocol.Filter{All: true}, From: "tip"})
	if c, _ := record.ParseCursor(sub.Cursor); c.Seq != sf.h.Handle.Head() || c.Snapshot != 0 {
		t.Fatalf("recreated from %s", sub.Cursor)
	}
}

// TestSubscribeDuringShutdown subscribes on several connections while the
// server shuts down: Shutdown returns in time and every connection ends.
// A dispatcher started by a subscription arriving during Shutdown once
// raced (wg.Add against Shutdown's wg.Wait; seen by -race in CI in
// TestDurableStreamsHandler's cleanup); the window is narrow, so this test
// exercises the path rather than reproducing that race on every run.
func TestSubscribeDuringShutdown(t *testing.T) {
	sf := newSeedFixture(t, 30)
	var wg sync.WaitGroup
	started := make(chan struct{}, 8)
	for c := range 8 {
		raw := streamtest.Dial(t, sf.srv.URL, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			go func() { // discard what the server sends
				for {
					if _, _, err := raw.WS.Read(ctx); err != nil {
						return
					}
				}
			}()
			for i := 0; ; i++ {
				b, _ := json.Marshal(protocol.Command{Type: protocol.TypeSubscribe, Stream: fmt.Sprintf("s%d-%d", c, i),
					Durable: i%2 == 0, Filter: &protocol.Filter{All: true}, BatchSize: 5})
				if err := raw.WS.Write(ctx, websocket.MessageText, b); err != nil {
					return // the server closed the connection
				}
				if i == 3 {
					started <- struct{}{}
				}
				b, _ = json.Marshal(protocol.Command{Type: protocol.TypeUnsubscribe, Stream: fmt.Sprintf("s%d-%d", c, i)})
				if err := raw.WS.Write(ctx, websocket.MessageText, b); err != nil {
					return
				}
			}
		}()
	}
	for range 8 {
		<-started
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sf.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	wg.Wait()
}
