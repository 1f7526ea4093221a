package streaming_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// TestQueueBudgetBoundsNonReadingSubscribers: 200 subscribers that do not
// read, each allowed 512 KiB of queued frames (100 MiB together), on a
// server whose queue budget is 8 MiB: the bytes queued on all connections
// (the server's own account) stay within the budget plus the frames being
// written, at most one per connection; the connections with the most
// queued are cut first ("memory budget"); a subscriber that reads keeps
// receiving every record, old and new.
func TestQueueBudgetBoundsNonReadingSubscribers(t *testing.T) {
	const subscribers, budget, perConn, batch = 200, 8 << 20, 512 << 10, 20
	h := streamingtest.NewHistory(t, "", nil)
	feed := newFeed(t, h, 9, 0, 100, true)
	replicate(t, feed, 1500, 50) // about 2.5 MB of records
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) {
		c.QueueBudget, c.SendQueueBytes, c.SendQueueFrames = budget, perConn, 1000
		// Only the budget cuts anyone off here (a client that does not
		// read does not answer pings either).
		c.WriteTimeout, c.HeartbeatInterval, c.PingTimeout = 10*time.Minute, 10*time.Minute, 10*time.Minute
	}})
	for range subscribers {
		subscribeBare(t, dialSmallBuffer(t, srv.URL), "s", batch)
	}
	reader := streamtest.Dial(t, srv.URL, nil)
	reader.Subscribe(protocol.Command{Stream: "r", Filter: &protocol.Filter{All: true}, BatchSize: batch})
	var got streamtest.Collector
	feed.FarTip = false
	replicate(t, feed, 300, 5)
	// The reader reads on: every record, old and new (each frame within a
	// minute: 200 connections fill up meanwhile on a shared machine).
	frames := drainWithin(t, reader, &got, int(h.Handle.Head()), time.Minute)
	largest := 0
	for _, f := range frames {
		b, _ := json.Marshal(f)
		largest = max(largest, len(b))
	}
	waitFor(t, "subscribers cut off at the budget", func() bool {
		return srv.Metric(t, "marlowe_streaming_queue_budget_cuts_total") >= 1
	})
	now, peak := srv.QueuedBytes()
	// A frame's JSON as the test re-encodes it is within a few percent of
	// the server's; twice the largest is a safe bound of one frame.
	overhead := int64(subscribers+1) * int64(2*largest)
	t.Logf("queued now %d bytes, peak %d, budget %d, frames being written at most %d; cut: %v", now, peak, budget, overhead,
		srv.Metric(t, "marlowe_streaming_queue_budget_cuts_total"))
	if peak > budget+overhead {
		t.Fatalf("%d bytes queued at the peak, budget %d plus %d in writers", peak, budget, overhead)
	}
	if peak < budget/2 {
		t.Fatalf("the queues never filled (peak %d bytes): the test did not test the budget", peak)
	}
	if g := srv.Metric(t, "marlowe_streaming_queued_bytes"); g != float64(now) && g > budget+float64(overhead) {
		t.Fatalf("marlowe_streaming_queued_bytes %v", g)
	}
	if got.Dups != 0 {
		t.Fatalf("%d duplicates", got.Dups)
	}
	reasons := disconnectReasons(t, srv)
	if len(reasons) != 1 || reasons[0] != protocol.CloseMemoryBudget {
		t.Fatalf("disconnect reasons %v, want only %q", reasons, protocol.CloseMemoryBudget)
	}
}

// TestQueueBudgetCutsTheClientsThatDoNotRead: the budget cuts first the
// connections whose writers have waited longest on a write the client does
// not take, never the reader whose queue is as full and whose writer waits
// too, only for less long. Eight subscribers that do not read, each
// allowed 1 MiB of queued frames, on a 3.5 MiB budget: four full queues do
// not fit and three do (a frame of 20 records is 60 KiB at most), so the
// budget cuts exactly five of them, and the three left wait on their
// writes for good. Then a reader subscribes and stops reading until its
// queue is full too: the fourth full queue does not fit, and the budget
// cuts one of the three that waited longer, not the reader, which reads on
// and gets every record. The bytes queued and in the writers stay within
// the budget and a frame a connection. (Cutting the largest queue first
// could cut the reader; so could judging by the moment alone, when the
// reader's writer happens to wait as the others flow.)
func TestQueueBudgetCutsTheClientsThatDoNotRead(t *testing.T) {
	const nonReaders, perConn, budget, batch = 8, 1 << 20, 7 << 19, 20
	const fit = budget / perConn // full queues within the budget
	ctx := context.Background()
	h := streamingtest.NewHistory(t, "", nil)
	feed := newFeed(t, h, 9, 0, 100, true)
	// About 25 MB of records: more than a connection's queue and the
	// kernel's socket buffers take.
	replicate(t, feed, 15000, 50)
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) {
		c.QueueBudget, c.SendQueueBytes, c.SendQueueFrames = budget, perConn, 1000
		c.WriteTimeout, c.HeartbeatInterval, c.PingTimeout = 10*time.Minute, 10*time.Minute, 10*time.Minute
	}})
	cuts := func() int { return int(srv.Metric(t, "marlowe_streaming_queue_budget_cuts_total")) }
	for range nonReaders {
		subscribeBare(t, dialSmallBuffer(t, srv.URL), "s", batch)
	}
	// Every queue left is nearly full (each frame is far below 1/8 of
	// one), so its writer waits on the client.
	waitFor(t, "the budget to cut all but the queues that fit", func() bool {
		now, _ := srv.QueuedBytes()
		return cuts() == nonReaders-fit && now >= fit*(perConn-perConn/8)
	})
	// The reader's window is 64 KiB: a smaller one reads at a crawl
	// (windows below the segment size wait on the kernel's timers), and a
	// wider one's socket buffers would take what its queue must hold.
	reader := dialSocketBuffer(t, srv.URL, 64<<10)
	subscribeBare(t, reader, "r", batch)
	waitFor(t, "the reader's full queue to cut one that waited longer", func() bool {
		return cuts() == nonReaders-fit+1
	})
	var got streamtest.Collector
	largest := 0
	for want := int(h.Handle.Head()); len(got.Records) < want; {
		readCtx, cancel := context.WithTimeout(ctx, time.Minute)
		_, data, err := reader.Read(readCtx)
		cancel()
		if err != nil {
			t.Fatalf("the reader at %d of %d records: %v", len(got.Records), want, err)
		}
		var f protocol.Frame
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		if f.Type == protocol.TypeSubscribed {
			continue
		}
		if f.Type != protocol.TypeBatch {
			t.Fatalf("the reader at %d of %d records: unexpected %s frame: %s", len(got.Records), want, f.Type, data)
		}
		if err := got.Add(f.Records); err != nil {
			t.Fatal(err)
		}
		largest = max(largest, len(data))
	}
	_, peak := srv.QueuedBytes()
	t.Logf("peak %d bytes queued, budget %d, largest frame %d; %d cut", peak, budget, largest, cuts())
	if got.Dups != 0 {
		t.Fatalf("%d duplicates", got.Dups)
	}
	if n := cuts(); n != nonReaders-fit+1 {
		t.Fatalf("%d connections cut, want %d", n, nonReaders-fit+1)
	}
	if peak > budget+int64((nonReaders+1)*largest) {
		t.Fatalf("%d bytes queued and in writers at the peak: the budget is %d", peak, budget)
	}
}
