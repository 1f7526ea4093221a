package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/chainsync/waitfor"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/client"
	"github.com/marlowe-follower/follower/streaming/internal/leakcheck"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// TestMain checks that no goroutine outlives the tests, as the streaming
// package's tests do (leakcheck.VerifyTestMain).
func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// fixture is a history with records and a server with durable streams.
type fixture struct {
	h    *streamingtest.History
	feed *streamingtest.Feed
	srv  *streamingtest.Server
}

func newFixture(t *testing.T, records int64, opts streamingtest.ServerOptions) *fixture {
	t.Helper()
	ctx := context.Background()
	h := streamingtest.NewHistory(t, "", nil)
	feed, err := streamingtest.NewFeed(h, 21, 0.6, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := feed.UntilRecords(ctx, records); err != nil {
		t.Fatal(err)
	}
	if opts.Streams == nil {
		streams, err := sqlstreams.OpenSQLite(ctx, h.Dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { streams.Close() })
		opts.Streams = streams
	}
	return &fixture{h: h, feed: feed, srv: streamingtest.StartServer(t, h, opts)}
}

func (fx *fixture) expected(t *testing.T, filter record.Filter, from record.Cursor) []record.Record {
	t.Helper()
	return streamtest.MustExpected(t, fx.h.Backend, filter, from, fx.h.Handle.Head())
}

// subscribeAll subscribes c to every record with req (its filter all)
// and returns the stream and the records it is to get: those from its
// start cursor up to the head.
func (fx *fixture) subscribeAll(t *testing.T, c *client.Client, req client.Request) (*client.Stream, []record.Record) {
	t.Helper()
	s, err := c.Subscribe(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	start, err := record.ParseCursor(s.Cursor())
	if err != nil {
		t.Fatal(err)
	}
	return s, fx.expected(t, record.Filter{}, start)
}

func newClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{URL: url, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// consume applies batches, deduplicating by seq, until want records are
// applied.
func consume(t *testing.T, s *client.Stream, applied *streamtest.Collector, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(applied.Records) < want {
		b := apply(t, ctx, s, applied)
		if err := s.Ack(ctx, b); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
}

// apply takes the next batch and applies it (deduplicating by seq).
func apply(t *testing.T, ctx context.Context, s *client.Stream, applied *streamtest.Collector) *client.Batch {
	t.Helper()
	b, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("after %d records: %v", len(applied.Records), err)
	}
	if err := applied.Add(b.Records); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSubscribeReceiveAck(t *testing.T) {
	fx := newFixture(t, 80, streamingtest.ServerOptions{})
	c := newClient(t, fx.srv.URL)
	ctx := context.Background()
	s, want := fx.subscribeAll(t, c, client.Request{Stream: "all", Filter: protocol.Filter{All: true}, BatchSize: 9})
	var applied streamtest.Collector
	consume(t, s, &applied, len(want))
	if err := streamtest.Same(applied.Records, want); err != nil || applied.Dups != 0 {
		t.Fatalf("%v (%d duplicates)", err, applied.Dups)
	}
	if c.Tip().Seq != fx.h.Handle.Head() {
		t.Fatalf("tip %+v", c.Tip())
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(ctx); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

// TestReconnectResumesEphemeralStream cuts the connection repeatedly, with
// batches in flight and idle: the client reconnects and resumes from its
// cursor; every record is delivered at least once and applied exactly
// once by deduplicating by seq.
func TestReconnectResumesEphemeralStream(t *testing.T) {
	fx := newFixture(t, 300, streamingtest.ServerOptions{})
	proxy := streamtest.NewProxy(t, fx.srv.Addr().String())
	c := newClient(t, proxy.URL())
	ctx := context.Background()
	s, want := fx.subscribeAll(t, c, client.Request{Stream: "e", Filter: protocol.Filter{All: true}, BatchSize: 10})
	var applied streamtest.Collector
	drops := 0
	ctx2, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for n := 0; len(applied.Records) < len(want); n++ {
		b := apply(t, ctx2, s, &applied)
		if n%11 == 5 { // applied, not yet acknowledged: it comes again
			before := c.Connects()
			proxy.DropAll()
			drops++
			// The ack below goes nowhere: it is sent once the client knows
			// the connection is gone and has made another.
			waitfor.Until(t, time.Minute, "the client to connect again", func() bool { return c.Connects() != before })
		}
		if err := s.Ack(ctx2, b); err != nil {
			t.Fatalf("ack: %v", err)
		}
		if n%7 == 3 { // acknowledged: idle, or the next batch in flight
			proxy.DropAll()
			drops++
		}
	}
	if err := streamtest.Same(applied.Records, want); err != nil {
		t.Fatal(err)
	}
	if c.Connects() < int64(drops) {
		t.Fatalf("%d connections for %d drops", c.Connects(), drops)
	}
	if applied.Dups == 0 {
		t.Fatal("no batch was delivered twice: the drops before an ack did not happen")
	}
	t.Logf("%d records, %d drops, %d connections, %d duplicates skipped", len(applied.Records), drops, c.Connects(), applied.Dups)
}

// TestReconnectResumesDurableStreamSkippingSeen: a durable stream resumes
// after its last ack; SkipSeen hides redelivered records.
func TestReconnectResumesDurableStreamSkippingSeen(t *testing.T) {
	fx := newFixture(t, 200, streamingtest.ServerOptions{})
	proxy := streamtest.NewProxy(t, fx.srv.Addr().String())
	c := newClient(t, proxy.URL())
	ctx := context.Background()
	start := record.Cursor{Snapshot: fx.h.Handle.Head()}
	s, err := c.Subscribe(ctx, client.Request{Stream: "d", Durable: true, Filter: protocol.Filter{All: true},
		BatchSize: 8, SkipSeen: true})
	if err != nil {
		t.Fatal(err)
	}
	want := fx.expected(t, record.Filter{}, start)
	var applied streamtest.Collector
	ctx2, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for n := 0; len(applied.Records) < len(want); n++ {
		b := apply(t, ctx2, s, &applied)
		if n%5 == 2 {
			proxy.DropAll() // before the ack: the batch comes again
			continue
		}
		if err := s.Ack(ctx2, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := streamtest.Same(applied.Records, want); err != nil || applied.Dups != 0 {
		t.Fatalf("%v; %d duplicates reached the application", err, applied.Dups)
	}
}

// TestServerRestartResumes: the server goes away and comes back on the
// same address; the client keeps retrying with backoff and resumes.
func TestServerRestartResumes(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, 60, streamingtest.ServerOptions{})
	addr := fx.srv.Addr().String()
	logs, seen := observer.New(zap.DebugLevel)
	c, err := client.New(client.Options{URL: fx.srv.URL, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		Logger: zap.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := c.Subscribe(ctx, client.Request{Stream: "r", Durable: true, Filter: protocol.Filter{All: true}, BatchSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	var applied streamtest.Collector
	consume(t, s, &applied, 20)
	fx.srv.Stop(t)
	waitfor.Until(t, time.Minute, "three failed attempts to connect", func() bool {
		return seen.FilterMessage("connecting failed").Len() >= 3
	})
	if err := fx.feed.UntilRecords(ctx, fx.h.Handle.Head()+30); err != nil {
		t.Fatal(err)
	}
	streams, err := sqlstreams.OpenSQLite(ctx, fx.h.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer streams.Close()
	streamingtest.StartServer(t, fx.h, streamingtest.ServerOptions{Addr: addr, Streams: streams})
	head := fx.h.Handle.Head()
	consume(t, s, &applied, int(head)) // the snapshot had every record current at the start, then the log
	if applied.Last() != head {
		t.Fatalf("last seq %d, head %d", applied.Last(), head)
	}
}

func TestContextCancellationAndClose(t *testing.T) {
	// Nothing listens there: Subscribe waits until its context ends.
	c := newClient(t, "ws://127.0.0.1:1/")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.Subscribe(ctx, client.Request{Stream: "x", Filter: protocol.Filter{All: true}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Subscribe with the server down: %v", err)
	}
	fx := newFixture(t, 5, streamingtest.ServerOptions{})
	c2 := newClient(t, fx.srv.URL)
	s, err := c2.Subscribe(context.Background(), client.Request{Stream: "t", From: "tip", Filter: protocol.Filter{All: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel2) // while Next waits
	if _, err := s.Next(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Next(context.Background())
		done <- err
	}()
	c2.Close()
	if err := <-done; !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if _, err := c2.Subscribe(context.Background(), client.Request{Stream: "u", Filter: protocol.Filter{All: true}}); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
}

// TestBackoffIsCapped: attempts against a refusing server keep coming at
// the capped interval, not ever more slowly. Capped at 40 ms, 12 attempts
// take about half a second; uncapped doubling from 5 ms would take 20 s
// (the schedule itself: TestBackoffSchedule).
func TestBackoffIsCapped(t *testing.T) {
	var hits atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer ts.Close()
	c, err := client.New(client.Options{URL: "ws" + strings.TrimPrefix(ts.URL, "http"), MinBackoff: 5 * time.Millisecond,
		MaxBackoff: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitfor.NoError(t, time.Minute, func() error {
		if n := hits.Load(); n < 12 {
			return fmt.Errorf("%d attempts, want 12", n)
		}
		return nil
	})
}

func TestRefusals(t *testing.T) {
	fx := newFixture(t, 5, streamingtest.ServerOptions{Config: func(c *streaming.Config) { c.Token = "tok" }})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bad := newClient(t, fx.srv.URL)
	if _, err := bad.Subscribe(ctx, client.Request{Stream: "a", Filter: protocol.Filter{All: true}}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("without the token: %v", err)
	}
	c, err := client.New(client.Options{URL: fx.srv.URL, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Subscribe(ctx, client.Request{Stream: "a", Filter: protocol.Filter{Kinds: []string{"nope"}}})
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != protocol.CodeBadFilter {
		t.Fatalf("bad filter: %v", err)
	}
	// The name is free again after a refusal.
	if _, err := c.Subscribe(ctx, client.Request{Stream: "a", Filter: protocol.Filter{All: true}}); err != nil {
		t.Fatal(err)
	}
}

// TestCloseWhileConnecting closes clients at every moment of their first
// connection (dialing, taking the connection, subscribing, reading): Close
// returns and nothing is left running (goleak). Close once missed a
// connection that the client took between Close's look at it and Close's
// cancel, and waited for its reader for ever; and a Subscribe in that
// window added a stream Close never ended, which waited for ever.
func TestCloseWhileConnecting(t *testing.T) {
	fx := newFixture(t, 5, streamingtest.ServerOptions{})
	for i := range 200 {
		c, err := client.New(client.Options{URL: fx.srv.URL, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, _ = c.Subscribe(context.Background(), client.Request{Stream: "s", Filter: protocol.Filter{All: true}})
		}()
		time.Sleep(time.Duration(i%20) * 100 * time.Microsecond)
		closed := make(chan struct{})
		go func() {
			c.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Fatalf("client %d: Close has not returned after 30 s", i)
		}
	}
}
