package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/streaming/protocol"
)

// membudget.mb is the queue budget TestStreamingMemoryBudget runs the
// service with; a large one (-membudget.mb 100000) shows the RSS the same
// subscribers take without the budget.
var membudgetMB = flag.Int("membudget.mb", 32, "TestStreamingMemoryBudget: the service's streaming queue budget in MiB")

// procMemory reads a process's resident set size now and at its peak
// (VmRSS, VmHWM), in bytes.
func procMemory(t *testing.T, pid int) (rss, peak int64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[2] != "kB" {
			continue
		}
		v, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = v << 10
		case "VmHWM:":
			peak = v << 10
		}
	}
	if rss == 0 || peak == 0 {
		t.Fatalf("no VmRSS or VmHWM in /proc/%d/status", pid)
	}
	return rss, peak
}

// metricValue returns the value of the series line that starts with
// series in a /metrics answer (0 when absent).
func metricValue(body, series string) float64 {
	for line := range strings.SplitSeq(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return 0
}

// TestStreamingMemoryBudget runs the binary with a streaming queue budget
// of 32 MiB over a history of several tens of megabytes of JSON and opens
// 200 WebSocket subscribers from the origin that never read (their sockets'
// receive buffers 4 KiB): each may queue 8 MiB (the per-connection bound),
// 1.6 GiB together. The process's peak RSS (VmHWM) stays within its RSS
// before they came plus twice the budget (the Go heap grows to twice what
// is live before it collects, GOGC=100), 96 MiB, and what each
// subscription catching up holds outside the budget (about three batches:
// docs/streaming.md); they are cut off with the close reason "memory
// budget", and a subscriber that reads from the origin gets every record
// meanwhile (cutting the largest queue first cut it: it keeps a full
// queue while it catches up). With -membudget.mb 100000 the same run shows
// the peak without the budget.
func TestStreamingMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const subscribers, batchSize = 200, 50
	budget := int64(*membudgetMB) << 20
	bin := buildBinary(t)
	ctx := t.Context()
	c, dataDir, wsURL := startStreamingService(t, ctx, bin, 4000, *membudgetMB)
	head := c.mustStatus(t).HistorySeq
	dbBytes := int64(0)
	if fi, err := os.Stat(filepath.Join(dataDir, "history.sqlite")); err == nil {
		dbBytes = fi.Size()
	}
	sub, _ := json.Marshal(protocol.Command{Type: protocol.TypeSubscribe, Stream: "s", Filter: &protocol.Filter{All: true},
		Mode: protocol.ModeBroadcast, BatchSize: batchSize})

	rctx, rcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer rcancel()
	rssBefore, peakBefore := procMemory(t, c.cmd.Process.Pid)
	// The subscribers that do not read come first, so that their writers
	// wait on a write the longest; the reader then comes among them.
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return conn, err
	}}
	defer tr.CloseIdleConnections()
	for i := range subscribers {
		ws, _, err := websocket.Dial(rctx, wsURL, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
		defer ws.CloseNow() //nolint:errcheck // test
		if err := ws.Write(rctx, websocket.MessageText, sub); err != nil {
			t.Fatal(err)
		}
	}
	// The reader: every record from the origin, in order, while the
	// budget cuts the others.
	// Its socket has a large receive buffer, as a client that reads may.
	readerTr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(16 << 20)
		}
		return conn, err
	}}
	defer readerTr.CloseIdleConnections()
	reader, _, err := websocket.Dial(rctx, wsURL, &websocket.DialOptions{HTTPClient: &http.Client{Transport: readerTr}})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.CloseNow() //nolint:errcheck // test
	reader.SetReadLimit(-1)
	if err := reader.Write(rctx, websocket.MessageText, sub); err != nil {
		t.Fatal(err)
	}
	readerDone := make(chan error, 1)
	var largest int64 // the reader's largest frame, in bytes (read once readerDone has a value)
	go func() {
		var last int64
		for last < head {
			_, b, err := reader.Read(rctx)
			if err != nil {
				readerDone <- fmt.Errorf("the reader at seq %d of %d: %w", last, head, err)
				return
			}
			largest = max(largest, int64(len(b)))
			var f protocol.Frame
			if err := json.Unmarshal(b, &f); err != nil {
				readerDone <- err
				return
			}
			if f.Type != protocol.TypeBatch {
				continue
			}
			for _, r := range f.Records {
				if r.Seq != last+1 {
					readerDone <- fmt.Errorf("the reader got seq %d after %d", r.Seq, last)
					return
				}
				last = r.Seq
			}
		}
		readerDone <- nil
	}()

	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	// Every subscriber that does not read is cut off in the end (by the
	// budget, or by the write timeout once the budget no longer needs to).
	waitUntil(t, 3*time.Minute, "the non-reading subscribers cut off", func() bool {
		return metricValue(c.metrics(t), "marlowe_streaming_connections") <= 1
	})
	m := c.metrics(t)
	cuts := metricValue(m, "marlowe_streaming_queue_budget_cuts_total")
	byBudget := metricValue(m, `marlowe_streaming_disconnects_total{reason="memory budget"}`)
	rss, peak := procMemory(t, c.cmd.Process.Pid)
	// Besides the budget, each subscription catching up holds about
	// three batches (a page read from the history, the batch formed from
	// it, its frame being made): docs/streaming.md.
	perSubscription := 3 * largest
	bound := rssBefore + 2*budget + 96<<20 + subscribers*perSubscription
	t.Logf("history: %d records, history.sqlite %d MiB; RSS before the subscribers %d MiB (peak %d MiB), after %d MiB, peak %d MiB: "+
		"%d MiB above, bound %d MiB (budget %d MiB, %d KiB per subscription); %v budget cuts, %v connections closed for the budget",
		head, dbBytes>>20, rssBefore>>20, peakBefore>>20, rss>>20, peak>>20, (peak-rssBefore)>>20, bound>>20, budget>>20,
		perSubscription>>10, cuts, byBudget)
	if cuts < 1 || byBudget < 1 {
		t.Fatalf("no subscriber was cut off for the memory budget (%v cuts, %v closes)", cuts, byBudget)
	}
	if peak > bound {
		t.Fatalf("peak RSS %d MiB, above %d MiB before the subscribers plus twice the %d MiB budget, 96 MiB and %d KiB per subscription",
			peak>>20, rssBefore>>20, budget>>20, perSubscription>>10)
	}
}
