package streaming_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/chainsync/waitfor"
	"github.com/marlowe-follower/follower/streaming"
)

// TestFanOut is BenchmarkFanOut at the scale of CI, for correctness only:
// 25 subscribers of each kind (bare WebSockets that take seqs and block
// numbers out of the frames' text, and the Go client, which decodes every
// record) in the benchmark's client process (TestFanOutClients: the test
// binary again) follow every record from the tip, acknowledging each
// batch, while the store commits 50 blocks a second for 3 s. Each subscriber receives
// every record committed after it subscribed exactly once, in seq order,
// with the block the store holds it in. No timing is checked: it waits on
// conditions only.
func TestFanOut(t *testing.T) {
	for _, kind := range []string{"raw", "go"} {
		t.Run("client="+kind, func(t *testing.T) { fanOutOnce(t, kind, 25, 50, 3*time.Second) })
	}
}

// fanOutOnce runs subscribers of kind from the tip while the store commits
// rate blocks a second for dur, and checks what each received.
func fanOutOnce(t *testing.T, kind string, subscribers, rate int, dur time.Duration) {
	ctx := context.Background()
	h := streamingtest.NewHistory(t, "", nil)
	feed := newFeed(t, h, 2, 0, 100, false)
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) {
		c.MaxConnections = subscribers + 10
	}})
	out := filepath.Join(t.TempDir(), "receipts")
	// The subscribers start from the tip once the store has committed
	// everything sent (newFeed waited for it) and before the next step:
	// each starts at head0.
	head0 := h.Handle.Head()
	clients := startClients(t, kind, srv.URL, "tip", subscribers, out, 2*time.Minute)
	if head := h.Handle.Head(); head != head0 {
		t.Fatalf("the head moved from %d to %d while the clients subscribed", head0, head)
	}
	feedCtx, stopFeed := context.WithTimeout(ctx, dur)
	err := feed.Run(feedCtx, time.Second/time.Duration(rate))
	stopFeed()
	if err != nil {
		t.Fatal(err)
	}
	if err := feed.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	head1 := h.Handle.Head()
	records := head1 - head0
	if records <= 0 {
		t.Fatalf("the store committed nothing after seq %d", head0)
	}
	// Every record sent to every subscriber, and every subscription's
	// acknowledgement at the head: each client has recorded them all (it
	// records a batch before it acknowledges it).
	want := float64(int64(subscribers) * records)
	waitfor.NoError(t, 2*time.Minute, func() error {
		sent, lag := srv.Metric(t, "marlowe_streaming_records_sent_total"), srv.Metric(t, "marlowe_streaming_max_lag")
		if sent < want || lag > 0 {
			return fmt.Errorf("%v of %v records sent, the subscribers up to %v records behind", sent, want, lag)
		}
		return nil
	})
	clients.finish(t)
	t.Logf("%d subscribers, %d records committed after they subscribed (seqs %d to %d)", subscribers, records, head0+1, head1)

	blocks := make(map[int64]uint64, records) // seq -> block number, as stored
	for seq := head0 + 1; seq <= head1; seq++ {
		r, err := h.Handle.RecordGet(ctx, seq)
		if err != nil {
			t.Fatalf("record %d: %v", seq, err)
		}
		blocks[seq] = r.Block.BlockNo
	}
	got := readReceipts(t, out, subscribers)
	for i, rs := range got {
		if int64(len(rs)) != records {
			t.Errorf("subscriber %d received %d records, want %d (seqs %d to %d)", i, len(rs), records, head0+1, head1)
		}
		for j, r := range rs {
			if seq := head0 + 1 + int64(j); r.seq != seq {
				t.Fatalf("subscriber %d's record %d: seq %d, want %d (each record once, in order; the previous %v)",
					i, j, r.seq, seq, rs[max(0, j-1)])
			}
			if r.block != blocks[r.seq] {
				t.Fatalf("subscriber %d's record of seq %d: block %d, the store's %d", i, r.seq, r.block, blocks[r.seq])
			}
		}
	}
}

// readReceipts reads the clients' file: each subscriber's receipts, in the
// order it received them.
func readReceipts(t *testing.T, file string, subscribers int) [][]receipt {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]receipt, subscribers)
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(l) // BLOCKNO UNIXNANO SEQ SUBSCRIBER
		if len(f) != 4 {
			t.Fatalf("a receipt %q: want BLOCKNO UNIXNANO SEQ SUBSCRIBER", l)
		}
		var v [4]int64
		for k := range f {
			if v[k], err = strconv.ParseInt(f[k], 10, 64); err != nil {
				t.Fatalf("a receipt %q: %v", l, err)
			}
		}
		if v[3] < 0 || v[3] >= int64(subscribers) {
			t.Fatalf("a receipt %q of subscriber %d: there are %d", l, v[3], subscribers)
		}
		got[v[3]] = append(got[v[3]], receipt{block: uint64(v[0]), at: v[1], seq: v[2]})
	}
	return got
}
