package streaming_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/marlowe-follower/follower/chainsync/waitfor"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// TestMain checks that no goroutine outlives the tests but protoactor's
// dead-letter throttle, which waits out its interval (a second) after a
// message to an actor that has stopped: a connection's goroutines tell
// its actor they ended, and the actor may be gone by then.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// seedFixture is a history with records, a server with durable streams,
// and a log observer that catches warnings and errors.
type seedFixture struct {
	h    *streamtest.History
	feed *streamtest.Feed
	srv  *streamtest.Server
	logs *observer.ObservedLogs
}

func newSeedFixture(t *testing.T, records int64) *seedFixture {
	t.Helper()
	ctx := context.Background()
	h := streamtest.NewHistory(t, "", nil)
	feed, err := streamtest.NewFeed(h, 3, 0.6, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := feed.UntilRecords(ctx, records); err != nil {
		t.Fatal(err)
	}
	streams, err := sqlstreams.OpenSQLite(ctx, h.Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { streams.Close() })
	core, logs := observer.New(zapcore.WarnLevel)
	srv := streamtest.StartServer(t, h, streamtest.ServerOptions{Streams: streams, Logger: zap.New(core)})
	return &seedFixture{h: h, feed: feed, srv: srv, logs: logs}
}

// drain reads and acknowledges batches until the collector holds want
// records, returning the batch frames seen.
func drain(t *testing.T, raw *streamtest.Raw, got *streamtest.Collector, want int) []*protocol.Frame {
	t.Helper()
	var frames []*protocol.Frame
	for len(got.Records) < want {
		f := raw.Next(10 * time.Second)
		if f.Type != protocol.TypeBatch {
			t.Fatalf("unexpected %s frame: %+v", f.Type, f)
		}
		if err := got.Add(f.Records); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
		raw.Ack(f)
	}
	return frames
}

func (sf *seedFixture) expected(t *testing.T, filter record.Filter, from record.Cursor) []record.Record {
	t.Helper()
	exp, err := streamtest.Expected(context.Background(), sf.h.Backend, filter, from, sf.h.Handle.Head())
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

func (sf *seedFixture) noWarnings(t *testing.T) {
	t.Helper()
	for _, e := range sf.logs.All() {
		t.Errorf("logged %s: %s %v", e.Level, e.Message, e.ContextMap())
	}
}

// waitFor waits until cond holds (waitfor.Until, the tests' one way to
// wait). The bound only catches a hang: what the tests wait for takes CPU
// (under the race detector, on a shared machine), so it is generous.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.Until(t, 2*time.Minute, what, cond)
}

// getJSON GETs url, checks the status and decodes the body into v (when
// not nil).
func getJSON(t *testing.T, url string, status int, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %s, want %d", url, resp.Status, status)
	}
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
}
