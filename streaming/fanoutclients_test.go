package streaming_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/streaming/client"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// The client process of BenchmarkFanOut, and the process's own figures
// (CPU time, resident set) the benchmarks report.

// TestFanOutClients is the client process of BenchmarkFanOut and
// BenchmarkCatchUpStorm; it does nothing unless
// FANOUT_CHILD=kind,url,subscribers,file,from is set. It subscribes,
// prints "ready", follows until its stdin closes, then writes one line
// "BLOCKNO UNIXNANO SEQ SUBSCRIBER" per record received to the file
// (unless it is "-"; each subscriber's in the order received) and prints
// its peak RSS and the CPU time it used while following. TestFanOut runs
// it in CI.
func TestFanOutClients(t *testing.T) {
	spec := os.Getenv("FANOUT_CHILD")
	if spec == "" {
		t.Skip("BenchmarkFanOut's client process")
	}
	parts := strings.Split(spec, ",")
	kind, url, file, from := parts[0], parts[1], parts[3], parts[4]
	n, _ := strconv.Atoi(parts[2])
	ctx, cancel := context.WithCancel(context.Background())
	receipts := make([][]receipt, n)
	var ready, done sync.WaitGroup
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			keep := file != "-"
			if kind == "raw" {
				rawSubscriber(t, ctx, url, from, keep, &receipts[i], &ready)
			} else {
				goSubscriber(t, ctx, url, from, keep, &receipts[i], &ready)
			}
		}()
	}
	ready.Wait()
	fmt.Println("ready")
	cpu0 := cpuTime()
	_, _ = io.Copy(io.Discard, os.Stdin)
	cpu := cpuTime() - cpu0
	rss := peakRSS()
	cancel()
	done.Wait()
	if file != "-" {
		var buf bytes.Buffer
		for i, rs := range receipts {
			for _, r := range rs {
				fmt.Fprintf(&buf, "%d %d %d %d\n", r.block, r.at, r.seq, i)
			}
		}
		if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("rss %d %d\n", rss, cpu.Nanoseconds())
}

// receipt is a record's block number, when it arrived (Unix ns) and its
// seq.
type receipt struct {
	block uint64
	at    int64
	seq   int64
}

// goSubscriber follows with the Go client package.
func goSubscriber(t *testing.T, ctx context.Context, url, from string, keep bool, out *[]receipt, ready *sync.WaitGroup) {
	c, err := client.New(client.Options{URL: url})
	if err != nil {
		t.Error(err)
		ready.Done()
		return
	}
	defer c.Close()
	s, err := c.Subscribe(ctx, client.Request{Stream: "f", From: from, Filter: protocol.Filter{All: true}})
	ready.Done()
	if err != nil {
		t.Error(err)
		return
	}
	for {
		bt, err := s.Next(ctx)
		if err != nil {
			return
		}
		now := time.Now().UnixNano()
		for _, r := range bt.Records {
			if keep {
				*out = append(*out, receipt{r.Block.BlockNo, now, r.Seq})
			}
		}
		_ = s.Ack(ctx, bt)
	}
}

// rawSubscriber follows on a bare WebSocket: it reads the batch number and
// each record's seq and block number out of the frame's text (a record's
// JSON begins with its seq, then its kind and block) and acknowledges.
func rawSubscriber(t *testing.T, ctx context.Context, url, from string, keep bool, out *[]receipt, ready *sync.WaitGroup) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Error(err)
		ready.Done()
		return
	}
	defer ws.CloseNow()
	context.AfterFunc(ctx, func() { _ = ws.CloseNow() })
	ws.SetReadLimit(-1)
	if err := ws.Write(ctx, websocket.MessageText, streamtest.SubscribeAll("f", from)); err != nil {
		t.Error(err)
		ready.Done()
		return
	}
	// Ready once subscribed: "tip" is the head when the server takes the
	// subscribe, and the run counts the records committed after ready.
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Error(err)
			ready.Done()
			return
		}
		if streamtest.FrameKind(data) == "subscribed" {
			break
		}
	}
	ready.Done()
	var buf bytes.Buffer
	for {
		_, r, err := ws.Reader(context.Background())
		if err != nil {
			return
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return
		}
		now, data := time.Now().UnixNano(), buf.Bytes()
		if streamtest.FrameKind(data) != "batch" {
			continue
		}
		if keep {
			streamtest.ScanRecords(data, func(seq int64, block uint64) { *out = append(*out, receipt{block, now, seq}) })
		}
		batch, _ := streamtest.BatchNumber(data)
		if err := ws.Write(context.Background(), websocket.MessageText, streamtest.AckText("f", batch)); err != nil {
			return
		}
	}
}

// cpuTime returns the CPU time this process used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS makes the peak RSS start over from the current one (Linux:
// 5 into /proc/self/clear_refs), so that setup does not count.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// currentRSS returns the process's resident set (VmRSS), in bytes.
func currentRSS() int64 { return procStatus("VmRSS:") }

// peakRSS returns the process's peak resident set (VmHWM), in bytes.
func peakRSS() int64 { return procStatus("VmHWM:") }

// procStatus reads a size in kB from /proc/self/status.
func procStatus(key string) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
