package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// TestStreamingStorm runs the binary over a history of about 1,600
// records with a 64 MiB streaming queue budget and a 16 MiB catch-up cache,
// and 300 WebSocket subscribers subscribe from 0 at the same moment, in ack
// mode, each acking every batch (of 50 records): every subscriber gets
// every record once and in order, and the service's peak RSS (VmHWM, reset
// when the storm begins) stays within its RSS before plus the budget,
// twice the cache (the Go heap's headroom over the pages it holds) and
// 32 MiB. The subscribers catch up through the shared cache (one read, one
// decode and one encoding of each record for all of them) and their frames
// are written around the records' shared JSON, so what each holds is its
// batch: 40 MiB above the RSS before on the server of 2026-12-02, against
// 134 MiB for the server before the cache in the same session (each
// subscription reading, decoding and encoding its own pages), which this
// bound (128 MiB above) does not let through. In ack mode a subscription
// has one batch in flight, so the queued frames stay well under the budget
// and nobody is cut for it. A memory bound, not a timing: the storm may
// take as long as the machine needs (within the test's limit).
func TestStreamingStorm(t *testing.T) {
	const subscribers, batchSize, budgetMiB, cacheMiB = 300, 50, 64, 16
	bin := buildBinary(t)
	ctx := t.Context()
	c, _, wsURL := startStreamingService(t, ctx, bin, 1000, budgetMiB, "--streaming-catchup-cache-mb", strconv.Itoa(cacheMiB))
	head := c.mustStatus(t).HistorySeq

	// Every subscriber connects and reads (so that it answers the
	// server's pings while the others connect); then all subscribe at once.
	sctx, scancel := context.WithTimeout(ctx, 5*time.Minute)
	defer scancel()
	subs := make([]*stormSubscriber, subscribers)
	for i := range subs {
		ws, _, err := websocket.Dial(sctx, wsURL, nil)
		if err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
		ws.SetReadLimit(-1)
		subs[i] = &stormSubscriber{ws: ws, head: head, done: make(chan struct{})}
		defer ws.CloseNow() //nolint:errcheck // test
		go subs[i].read()
	}
	pid := c.cmd.Process.Pid
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the service's peak RSS: %v", err)
	}
	rssBefore, _ := procMemory(t, pid)
	sub := []byte(`{"type":"subscribe","stream":"s","from":"0","filter":{"all":true},"batchSize":` + strconv.Itoa(batchSize) + `}`)
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.ws.Write(sctx, websocket.MessageText, sub); err != nil {
				s.fail(fmt.Errorf("subscribe: %w", err))
			}
		}()
	}
	wg.Wait()
	context.AfterFunc(sctx, func() {
		for _, s := range subs {
			s.fail(fmt.Errorf("not caught up in 5 minutes"))
		}
	})
	for i, s := range subs {
		<-s.done
		if err := s.result(); err != nil {
			t.Fatalf("subscriber %d after %d of %d records: %v", i, s.last, head, err)
		}
	}
	rss, peak := procMemory(t, pid)
	bound := rssBefore + budgetMiB<<20 + 2*cacheMiB<<20 + 32<<20
	m := c.metrics(t)
	t.Logf("%d subscribers each got the %d records once and in order; RSS before %d MiB, peak %d MiB (%d MiB above), after %d MiB; "+
		"bound %d MiB (budget %d MiB); %v queue budget cuts", subscribers, head, rssBefore>>20, peak>>20, (peak-rssBefore)>>20,
		rss>>20, bound>>20, budgetMiB, metricValue(m, "marlowe_streaming_queue_budget_cuts_total"))
	if peak > bound {
		t.Fatalf("peak RSS %d MiB, above %d MiB before the storm plus the %d MiB budget, twice the %d MiB cache and 32 MiB",
			peak>>20, rssBefore>>20, budgetMiB, cacheMiB)
	}
}

// stormSubscriber is a bare WebSocket subscriber of TestStreamingStorm: it
// takes each record's seq and the batch number out of the frame's text
// (the server writes every record starting with its seq), checks that
// every seq follows the one before, and acks every batch, until it has
// the head.
type stormSubscriber struct {
	ws   *websocket.Conn
	head int64
	last int64 // read once done is closed
	done chan struct{}

	mu       sync.Mutex
	err      error
	finished bool
}

// fail ends the subscriber with err, unless it ended before.
func (s *stormSubscriber) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil && !s.finished {
		s.err = err
		_ = s.ws.CloseNow()
	}
}

// result is the error that ended the subscriber (nil: it got the head).
func (s *stormSubscriber) result() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *stormSubscriber) read() {
	defer close(s.done)
	defer func() {
		s.mu.Lock()
		s.finished = true
		s.mu.Unlock()
	}()
	var buf bytes.Buffer
	for s.last < s.head {
		_, r, err := s.ws.Reader(context.Background())
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			s.fail(err)
			return
		}
		data := buf.Bytes()
		switch {
		case bytes.HasPrefix(data, []byte(`{"type":"error"`)):
			s.fail(fmt.Errorf("error frame: %s", data))
			return
		case !bytes.HasPrefix(data, []byte(`{"type":"batch"`)):
			continue
		}
		for rest := data; ; {
			k := bytes.Index(rest, []byte(`{"seq":`))
			if k < 0 {
				break
			}
			rest = rest[k+len(`{"seq":`):]
			seq := streamtest.LeadingDigits(rest)
			if seq != s.last+1 {
				s.fail(fmt.Errorf("seq %d after %d", seq, s.last))
				return
			}
			s.last = seq
		}
		k := bytes.Index(data, []byte(`"batch":`))
		if k < 0 {
			s.fail(fmt.Errorf("a batch without its number: %.200s", data))
			return
		}
		ack := `{"type":"ack","stream":"s","batch":` + strconv.FormatInt(streamtest.LeadingDigits(data[k+len(`"batch":`):]), 10) + `}`
		if err := s.ws.Write(context.Background(), websocket.MessageText, []byte(ack)); err != nil {
			s.fail(err)
			return
		}
	}
}

// startStreamingService runs the binary (its store in dataDir) on a
// pregenerated devnet chain of blocks blocks, 90% of them with Marlowe
// activity and no rollback, with a streaming queue budget of budgetMiB,
// and the extra flags, and waits until it committed the whole chain and
// is ready; wsURL is its streaming API.
func startStreamingService(t *testing.T, ctx context.Context, bin string, blocks uint64, budgetMiB int, extra ...string) (c *child, dataDir, wsURL string) {
	t.Helper()
	tmp := t.TempDir()
	socket := filepath.Join(tmp, "node.socket")
	gcfg := devnet.DefaultGeneratorConfig()
	gcfg.Seed, gcfg.RollbackEvery, gcfg.MarloweShare = 21, 0, 0.9
	dn, err := devnet.Start(ctx, devnet.RunConfig{SocketPath: socket, Generator: gcfg, Blocks: blocks, Pregenerate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dn.Close() })
	dataDir = filepath.Join(tmp, "data")
	qport, sport := freePort(t), freePort(t)
	args := append([]string{"run", "--node-socket", socket, "--network-magic", strconv.Itoa(devnet.NetworkMagic),
		"--data-dir", dataDir, "--query-host", "127.0.0.1", "--query-port", strconv.Itoa(qport),
		"--streaming-host", "127.0.0.1", "--streaming-port", strconv.Itoa(sport),
		"--streaming-queue-budget-mb", strconv.Itoa(budgetMiB),
		"--log-level", "warn", "--progress-bar", "never", "--progress-period", "0s"}, extra...)
	c = startChild(t, bin, qport, args...)
	waitUntil(t, 3*time.Minute, fmt.Sprintf("block %d committed and ready", blocks), func() bool {
		return c.committed(t) == blocks && c.isReady()
	})
	return c, dataDir, "ws://127.0.0.1:" + strconv.Itoa(sport) + "/"
}
