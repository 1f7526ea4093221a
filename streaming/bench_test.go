package streaming_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/chainsync/waitfor"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/client"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// benchRecords is the size of the catch-up benchmark's history.
const benchRecords = 100_000

// BenchmarkCatchUp measures one subscriber catching up over a WebSocket
// with the Go client: every record of a 100,000-record history (payloads
// of the devnet's Marlowe lifecycles), snapshot from origin, acknowledged
// batch by batch. The figure is records/s end to end, client decoding
// included.
func BenchmarkCatchUp(b *testing.B) {
	ctx := context.Background()
	h := streamingtest.NewHistory(b, "", nil)
	feed := newFeed(b, h, 1, 0, 2000, true)
	replicate(b, feed, benchRecords-int(h.Handle.Head()), 50)
	total := int(h.Handle.Head())
	srv := streamingtest.StartServer(b, h, streamingtest.ServerOptions{})
	for _, size := range []int{200, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			c, err := client.New(client.Options{URL: srv.URL})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				s, err := c.Subscribe(ctx, client.Request{Stream: strconv.Itoa(i), Filter: protocol.Filter{All: true}, BatchSize: size})
				if err != nil {
					b.Fatal(err)
				}
				for n := 0; n < total; {
					bt, err := s.Next(ctx)
					if err != nil {
						b.Fatal(err)
					}
					n += len(bt.Records)
					if err := s.Ack(ctx, bt); err != nil {
						b.Fatal(err)
					}
				}
				_ = s.Close(ctx)
			}
			b.ReportMetric(float64(total*b.N)/time.Since(start).Seconds(), "records/s")
			b.ReportMetric(float64(total), "records/op")
		})
	}
}

// BenchmarkFanOut follows the devnet chain with 1,000 concurrent
// subscribers (every record, ack mode, from the tip, one connection each)
// while the store commits blocks at a given rate (0: as fast as the store
// commits them one by one). The subscribers run in a child process (the
// test binary again, TestFanOutClients), as clients on other machines
// would, so that the figures are the server's: the latency from a block's
// commit to a subscriber receiving its records (p50, p99, max over every
// subscriber and record, both processes reading the same wall clock), the
// records committed and delivered per second, and the peak RSS of the
// server process (history store and feed included) and of the clients.
//
// client=raw subscribers are bare WebSocket connections that take the
// block numbers out of a frame without decoding its records; client=go
// subscribers use the Go client package, which decodes every record.
// FANOUT_CLIENTS_CPUPROFILE=FILE writes the client process's CPU profile
// (the server's is -test.cpuprofile's).
func BenchmarkFanOut(b *testing.B) {
	subscribers := 1000
	if v := os.Getenv("FANOUT_SUBSCRIBERS"); v != "" {
		subscribers, _ = strconv.Atoi(v)
	}
	for _, kind := range []string{"raw", "go"} {
		for _, rate := range []int{2, 20, 0} {
			if kind == "go" && rate == 0 {
				continue // 1,000 decoding clients on this machine's two cores cannot follow the maximum rate
			}
			r := strconv.Itoa(rate)
			if rate == 0 {
				r = "max"
			}
			b.Run(fmt.Sprintf("client=%s/subscribers=%d/blocks_per_s=%s", kind, subscribers, r), func(b *testing.B) {
				for range b.N {
					fanOut(b, kind, subscribers, rate, 10*time.Second)
				}
			})
		}
	}
}

func fanOut(b *testing.B, kind string, subscribers, rate int, dur time.Duration) {
	ctx := context.Background()
	h := streamingtest.NewHistory(b, "", nil)
	if v := os.Getenv("FANOUT_PAGE"); v != "" {
		// The history handle's catch-up page: what a subscription that fell
		// behind holds at a time.
		h.Handle.PageSize, _ = strconv.Atoi(v)
	}
	feed := newFeed(b, h, 2, 0, 100, false)
	var mu sync.Mutex
	commits := map[uint64]int64{} // block number -> commit time, Unix ns
	feed.OnCommit = func(blockNo uint64) {
		now := time.Now().UnixNano()
		mu.Lock()
		commits[blockNo] = now
		mu.Unlock()
	}
	srv := streamingtest.StartServer(b, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) {
		c.MaxConnections = subscribers + 10
		c.HeartbeatInterval = 10 * time.Second
		c.PingTimeout = 20 * time.Second
		c.WriteTimeout = 10 * time.Second
	}})
	out := filepath.Join(b.TempDir(), "receipts")
	clients := startClients(b, kind, srv.URL, "tip", subscribers, out, 0)
	head0 := h.Handle.Head()
	runtime.GC()
	resetPeakRSS()
	b.ResetTimer()
	started, cpu0 := time.Now(), cpuTime()
	var period time.Duration
	if rate > 0 {
		period = time.Second / time.Duration(rate)
	}
	feedCtx, stopFeed := context.WithTimeout(ctx, dur)
	if err := feed.Run(feedCtx, period); err != nil {
		b.Fatal(err)
	}
	stopFeed()
	if err := feed.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(started)
	records := h.Handle.Head() - head0
	waitCaughtUp(b, srv, 60*time.Second)
	b.StopTimer()
	serverCPU := cpuTime() - cpu0
	serverRSS := peakRSS()
	clientRSS, clientCPU := clients.finish(b)
	raw, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	var all []time.Duration
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(l) // BLOCKNO UNIXNANO SEQ SUBSCRIBER
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseUint(f[0], 10, 64)
		t, _ := strconv.ParseInt(f[1], 10, 64)
		if c, ok := commits[n]; ok {
			all = append(all, time.Duration(t-c))
		}
	}
	slices.Sort(all)
	if len(all) == 0 {
		b.Fatal("no records delivered")
	}
	q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50_ms")
	b.ReportMetric(q(0.99), "p99_ms")
	b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max_ms")
	b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(serverRSS)/(1<<20), "server_rss_MB")
	b.ReportMetric(float64(serverCPU.Microseconds())/float64(len(all)), "server_cpu_us/delivery")
	b.ReportMetric(float64(clientCPU)/1000/float64(len(all)), "clients_cpu_us/delivery")
	b.ReportMetric(float64(clientRSS)/(1<<20), "clients_rss_MB")
	if missing := int64(subscribers)*records - int64(len(all)); missing != 0 {
		b.Errorf("%d of %d deliveries missing", missing, int64(subscribers)*records)
	}
}

// waitCaughtUp waits until every subscription acknowledged the head.
func waitCaughtUp(b *testing.B, srv *streamingtest.Server, limit time.Duration) {
	waitfor.NoError(b, limit, func() error {
		if lag := srv.Metric(b, "marlowe_streaming_max_lag"); lag > 0 {
			return fmt.Errorf("the subscribers are still %v records behind", lag)
		}
		return nil
	})
}

// clientProcess is TestFanOutClients running in a child process.
type clientProcess struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	lines  *bufio.Scanner
	limit  time.Duration
	killed atomic.Bool
}

// startClients starts n subscribers of the given kind in a child process
// and waits until they are subscribed. file receives their receipts ("-":
// none are kept). limit, when not 0, bounds the wait for them and, in
// finish, for their end: the process is killed after it, and the test
// fails. The process is killed when the test ends, if it still runs.
func startClients(t testing.TB, kind, url, from string, n int, file string, limit time.Duration) *clientProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFanOutClients$", "-test.count=1")
	if prof := os.Getenv("FANOUT_CLIENTS_CPUPROFILE"); prof != "" {
		// The clients' CPU profile (a Go client's decoding, say).
		cmd.Args = append(cmd.Args, "-test.cpuprofile="+prof)
	}
	cmd.Env = append(os.Environ(), fmt.Sprintf("FANOUT_CHILD=%s,%s,%d,%s,%s", kind, url, n, file, from))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &clientProcess{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout), limit: limit}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	defer p.watch()()
	for p.lines.Scan() {
		if p.lines.Text() == "ready" {
			return p
		}
	}
	err := cmd.Wait()
	if p.killed.Load() {
		t.Fatalf("the clients were not subscribed within %s: killed (%v)", limit, err)
	}
	t.Fatalf("the clients' process ended before its subscribers were ready: %v", err)
	return nil
}

// watch kills the process once its limit has passed (none when 0) until
// the returned stop is called.
func (p *clientProcess) watch() (stop func()) {
	if p.limit == 0 {
		return func() {}
	}
	timer := time.AfterFunc(p.limit, func() {
		p.killed.Store(true)
		_ = p.cmd.Process.Kill()
	})
	return func() { timer.Stop() }
}

// finish stops the clients and returns their peak RSS and CPU time.
func (p *clientProcess) finish(t testing.TB) (rss, cpu int64) {
	t.Helper()
	defer p.watch()()
	p.stdin.Close() // the clients write their receipts and exit
	var out []string
	for p.lines.Scan() {
		if v, ok := strings.CutPrefix(p.lines.Text(), "rss "); ok {
			r, c, _ := strings.Cut(v, " ")
			rss, _ = strconv.ParseInt(r, 10, 64)
			cpu, _ = strconv.ParseInt(c, 10, 64)
		} else if line := p.lines.Text(); line != "PASS" {
			fmt.Fprintln(os.Stderr, "clients:", line) // their failures
			out = append(out, line)
		}
	}
	if err := p.cmd.Wait(); err != nil {
		if p.killed.Load() {
			t.Fatalf("the clients did not end within %s: killed (%v)\n%s", p.limit, err, strings.Join(out, "\n"))
		}
		t.Fatalf("clients: %v\n%s", err, strings.Join(out, "\n"))
	}
	return rss, cpu
}

// BenchmarkCatchUpStorm starts 1,000 subscribers from the origin of a
// 20,000-record history at once (a restart of the server with every
// durable stream behind, say): every subscription catches up at the same
// time. It reports the records delivered per second over all of them, the
// server's peak RSS above the RSS before, and its RSS once the storm has
// passed, with the shared catch-up cache (pages=shared) and without it
// (pages=own: every stream reads its own pages, as before the cache), and
// the catch-up rate of one subscriber alone (subscribers=1), in the same
// run. It runs only with STREAMING_STORM=1.
//
//	STREAMING_STORM=1 go test -run '^$' -bench 'BenchmarkCatchUpStorm' -benchtime 1x -timeout 30m ./streaming/
func BenchmarkCatchUpStorm(b *testing.B) {
	if os.Getenv("STREAMING_STORM") == "" {
		b.Skip("set STREAMING_STORM=1: it takes minutes and gigabytes")
	}
	subscribers, records := 1000, 20_000
	if v := os.Getenv("FANOUT_SUBSCRIBERS"); v != "" {
		subscribers, _ = strconv.Atoi(v)
	}
	for _, c := range []struct {
		n     int
		pages string
	}{{1, "shared"}, {subscribers, "shared"}, {subscribers, "own"}} {
		b.Run(fmt.Sprintf("subscribers=%d/records=%d/pages=%s", c.n, records, c.pages), func(b *testing.B) {
			for range b.N {
				catchUpStorm(b, c.n, records, c.pages == "shared")
			}
		})
	}
}

func catchUpStorm(b *testing.B, subscribers, records int, shared bool) {
	h := streamingtest.NewHistory(b, "", nil)
	feed := newFeed(b, h, 2, 0, 1000, true)
	replicate(b, feed, records-int(h.Handle.Head()), 50)
	srv := streamingtest.StartServer(b, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) {
		c.MaxConnections = subscribers + 10
		c.HeartbeatInterval = 10 * time.Second
		c.PingTimeout = 30 * time.Second
		c.WriteTimeout = 30 * time.Second
		if !shared {
			c.CatchUpCacheBytes, c.CatchUpReads = -1, -1
		}
	}})
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	rss0 := currentRSS()
	b.ResetTimer()
	started := time.Now()
	clients := startClients(b, "raw", srv.URL, "origin", subscribers, "-", 0)
	// Every subscriber caught up: every record went out to each (a stream
	// that has not published itself yet shows no lag), and no running
	// stream lags.
	want := subscribers * snapshotRecords(b, h)
	waitfor.NoError(b, 10*time.Minute, func() error {
		if sent := srv.Metric(b, "marlowe_streaming_records_sent_total"); sent < float64(want) {
			return fmt.Errorf("%v of %d deliveries", sent, want)
		}
		return nil
	})
	waitCaughtUp(b, srv, 10*time.Minute)
	elapsed := time.Since(started)
	b.StopTimer()
	serverRSS := peakRSS()
	clientRSS, _ := clients.finish(b)
	runtime.GC()
	debug.FreeOSMemory()
	after := currentRSS()
	b.ReportMetric(float64(want)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(elapsed.Seconds(), "seconds")
	b.ReportMetric(float64(rss0)/(1<<20), "server_rss_before_MB")
	b.ReportMetric(float64(serverRSS-rss0)/(1<<20), "server_peak_rss_above_MB")
	b.ReportMetric(float64(after-rss0)/(1<<20), "server_rss_after_above_MB")
	b.ReportMetric(float64(clientRSS)/(1<<20), "clients_rss_MB")
}

// snapshotRecords counts the records a subscription from the origin gets:
// those current at the head (not rolled back, no markers).
func snapshotRecords(b *testing.B, h *streamingtest.History) int {
	head := h.Handle.Head()
	n := 0
	for after := int64(0); ; {
		recs, err := h.Handle.RecordList(context.Background(), &record.RecordListParams{Mode: record.ModeSnapshot,
			Snapshot: head, After: after, Limit: record.MaxListLimit})
		if err != nil {
			b.Fatal(err)
		}
		n += len(recs)
		if len(recs) < record.MaxListLimit {
			return n
		}
		after = recs[len(recs)-1].Seq
	}
}
