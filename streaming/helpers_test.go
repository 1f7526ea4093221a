package streaming_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/chainsync/waitfor"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/internal/leakcheck"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// TestMain checks that no goroutine outlives the tests (leakcheck.VerifyTestMain).
func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// seedFixture is a history with records, a server with durable streams,
// and a log observer that catches warnings and errors.
type seedFixture struct {
	h    *streamingtest.History
	feed *streamingtest.Feed
	srv  *streamingtest.Server
	logs *observer.ObservedLogs
}

func newSeedFixture(t *testing.T, records int64) *seedFixture {
	t.Helper()
	return newSeedFixtureConfig(t, records, nil)
}

// newSeedFixtureConfig is newSeedFixture with config applied to the
// server's configuration (nil: the tests' defaults).
func newSeedFixtureConfig(t *testing.T, records int64, config func(*streaming.Config)) *seedFixture {
	t.Helper()
	h := streamingtest.NewHistory(t, "", nil)
	feed := newFeed(t, h, 3, 0, records, false)
	core, logs := observer.New(zapcore.WarnLevel)
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Streams: sqliteStreams(t, h.Dir), Logger: zap.New(core), Config: config})
	return &seedFixture{h: h, feed: feed, srv: srv, logs: logs}
}

// newFeed steps a feed of the devnet chain (seed, rollbackEvery: 0 for
// none) into h until h holds records. With farTip the store takes itself
// for far behind the node and commits in bulk; the feed stays so.
func newFeed(t testing.TB, h *streamingtest.History, seed int64, rollbackEvery int, records int64, farTip bool) *streamingtest.Feed {
	t.Helper()
	feed, err := streamingtest.NewFeed(h, seed, 0.6, rollbackEvery)
	if err != nil {
		t.Fatal(err)
	}
	feed.FarTip = farTip
	if err := feed.UntilRecords(context.Background(), records); err != nil {
		t.Fatal(err)
	}
	return feed
}

// replicate appends n copies of the records the feed generated, perBlock
// to a block, and waits until the store has committed them.
func replicate(t testing.TB, feed *streamingtest.Feed, n, perBlock int) {
	t.Helper()
	if err := feed.Replicate(n, perBlock); err != nil {
		t.Fatal(err)
	}
	if err := feed.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// sqliteStreams opens a stream store in the data directory dir, closed
// when the test ends.
func sqliteStreams(t testing.TB, dir string) *sqlstreams.Store {
	t.Helper()
	st, err := sqlstreams.OpenSQLite(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// drain reads and acknowledges batches until the collector holds want
// records, returning the batch frames seen.
func drain(t *testing.T, raw *streamtest.Raw, got *streamtest.Collector, want int) []*protocol.Frame {
	t.Helper()
	return drainWithin(t, raw, got, want, 10*time.Second)
}

// drainWithin is drain waiting up to timeout for each frame.
func drainWithin(t *testing.T, raw *streamtest.Raw, got *streamtest.Collector, want int, timeout time.Duration) []*protocol.Frame {
	t.Helper()
	var frames []*protocol.Frame
	for len(got.Records) < want {
		f := raw.Next(timeout)
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
	return streamtest.MustExpected(t, sf.h.Backend, filter, from, sf.h.Handle.Head())
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

// receive waits up to d for a value on c; the test fails with failure
// when none comes.
func receive[T any](t *testing.T, c <-chan T, d time.Duration, failure string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(d):
		t.Fatal(failure)
	}
	panic("unreachable")
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

// roundTrip sends req and returns the response with its body, read and
// closed.
func roundTrip(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// newRequest is a request without a body, with header (nil: none).
func newRequest(t *testing.T, method, url string, header http.Header) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return req
}

// subscribeBare subscribes on a bare WebSocket, which the test may never
// read: stream, every record, broadcast, in batches of batch.
func subscribeBare(t *testing.T, ws *websocket.Conn, stream string, batch int) {
	t.Helper()
	cmd, err := json.Marshal(protocol.Command{Type: protocol.TypeSubscribe, Stream: stream, Filter: &protocol.Filter{All: true},
		Mode: protocol.ModeBroadcast, BatchSize: batch})
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Write(context.Background(), websocket.MessageText, cmd); err != nil {
		t.Fatal(err)
	}
}

// disconnectReasons lists the reasons srv counted disconnections for
// (marlowe_streaming_disconnects_total's reason labels).
func disconnectReasons(t *testing.T, srv *streamingtest.Server) []string {
	t.Helper()
	mfs, err := srv.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, mf := range mfs {
		if mf.GetName() == "marlowe_streaming_disconnects_total" {
			for _, m := range mf.GetMetric() {
				reasons = append(reasons, m.GetLabel()[0].GetValue())
			}
		}
	}
	return reasons
}

// turns takes the batches of one durable stream on several connections,
// as consumers that work on a batch a moment and acknowledge it: it
// collects the records, counts the batches of each connection and the
// round trips that overlapped another (one at a time across the
// connections is the rule).
type turns struct {
	mu          sync.Mutex
	all         streamtest.Collector
	per         []int  // batches taken, by connection
	lastCursor  string // the cursor of the last batch taken
	outstanding atomic.Int32
	overlap     atomic.Int32
	wg          sync.WaitGroup
	done        chan struct{}
}

func newTurns(conns int) *turns {
	return &turns{per: make([]int, conns), done: make(chan struct{})}
}

// read reads raw, waiting up to poll for each frame, in a goroutine that
// hands each frame (or the error) to handle, until stop.
func (tr *turns) read(raw *streamtest.Raw, poll time.Duration, handle func(*protocol.Frame, error)) {
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		for {
			f, err := raw.TryRead(poll)
			select {
			case <-tr.done:
				return
			default:
			}
			handle(f, err)
		}
	}()
}

// take works on batch f of connection i for a moment (work) and
// acknowledges it.
func (tr *turns) take(t *testing.T, i int, raw *streamtest.Raw, f *protocol.Frame, work time.Duration) {
	if tr.outstanding.Add(1) > 1 {
		tr.overlap.Add(1)
	}
	tr.mu.Lock()
	tr.per[i]++
	if err := tr.all.Add(f.Records); err != nil {
		t.Error(err)
	}
	tr.lastCursor = f.Cursor
	tr.mu.Unlock()
	time.Sleep(work) // the consumer's work, not a wait
	tr.outstanding.Add(-1)
	raw.Ack(f)
}

// records is how many records were taken.
func (tr *turns) records() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.all.Records)
}

// stop ends the readers and waits for them.
func (tr *turns) stop() {
	close(tr.done)
	tr.wg.Wait()
}

// check fails the test unless the records taken are want, each once, in
// round trips that never overlapped.
func (tr *turns) check(t *testing.T, want []record.Record) {
	t.Helper()
	if err := streamtest.Same(tr.all.Records, want); err != nil {
		t.Fatal(err)
	}
	if tr.all.Dups != 0 || tr.overlap.Load() != 0 {
		t.Fatalf("%d duplicates, %d overlapping round trips across the connections", tr.all.Dups, tr.overlap.Load())
	}
}
