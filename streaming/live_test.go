package streaming_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// follower subscribes on its own connection and collects records,
// acknowledging each batch, until it holds want records. With
// reconnectEvery set it drops its connection after that many batches and
// subscribes again from the cursor of its last batch.
type follower struct {
	name           string
	cmd            protocol.Command
	reconnectEvery int
	start          record.Cursor
	started        chan struct{} // closed once start is set
	got            streamtest.Collector
	err            error
}

func (f *follower) run(t *testing.T, url string, want func() int, done <-chan struct{}) {
	raw := streamtest.Dial(t, url, nil)
	sub := raw.Subscribe(f.cmd)
	var err error
	f.start, err = record.ParseCursor(sub.Cursor)
	close(f.started)
	if err != nil {
		f.err = err
		return
	}
	// A follower that gets no batch for a minute has hung; one that gets
	// them slowly (the race detector on a busy machine) has not.
	const stall = time.Minute
	batches := 0
	deadline := time.Now().Add(stall)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			if len(f.got.Records) >= want() {
				return
			}
		default:
		}
		fr, err := raw.TryRead(500 * time.Millisecond)
		if errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		if err != nil {
			f.err = err
			return
		}
		switch fr.Type {
		case protocol.TypeBatch:
			if f.err = checkBatch(fr); f.err != nil {
				return
			}
			if err := f.got.Add(fr.Records); err != nil {
				f.err = err
				return
			}
			raw.Ack(fr)
			deadline = time.Now().Add(stall)
			if batches++; f.reconnectEvery > 0 && batches%f.reconnectEvery == 0 {
				_ = raw.WS.CloseNow()
				raw = streamtest.Dial(t, url, nil)
				cmd := f.cmd
				cmd.From = fr.Cursor
				raw.Subscribe(cmd)
			}
		case protocol.TypeError:
			f.err = fmt.Errorf("error frame %s: %s", fr.Code, fr.Message)
			return
		}
	}
	f.err = fmt.Errorf("%s: no batch for %s, with %d records", f.name, stall, len(f.got.Records))
}

// checkBatch checks a batch's cursor and tip against its records.
func checkBatch(fr *protocol.Frame) error {
	last := fr.Records[len(fr.Records)-1].Seq
	if fr.Tip.Seq < last {
		return fmt.Errorf("batch %d holds seq %d beyond the head %d it reports", fr.Batch, last, fr.Tip.Seq)
	}
	c, err := record.ParseCursor(fr.Cursor)
	switch {
	case err != nil:
		return fmt.Errorf("batch %d: %w", fr.Batch, err)
	case c.Snapshot > 0 && c.Seq != last:
		return fmt.Errorf("batch %d: snapshot cursor %s after seq %d", fr.Batch, c, last)
	case c.Snapshot == 0 && c.Seq < last:
		return fmt.Errorf("batch %d: cursor %s before its last seq %d", fr.Batch, c, last)
	}
	return nil
}

// TestSnapshotThenLiveUnderAppendsAndRollbacks subscribes with several
// filters and starting points while the store commits blocks and
// rollbacks, and checks that each subscriber got exactly what invariant 3
// requires: the snapshot as of its start, then every later matching record
// of the log in seq order, rollback markers included, nothing twice.
func TestSnapshotThenLiveUnderAppendsAndRollbacks(t *testing.T) {
	ctx := context.Background()
	h := streamingtest.NewHistory(t, "", nil)
	feed := newFeed(t, h, 7, 12, 0, true)
	if err := feed.Steps(400); err != nil {
		t.Fatal(err)
	}
	if err := feed.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	feed.FarTip = false // commit every block from now on: live delivery
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{})
	some, err := h.Backend.RecordList(ctx, &record.RecordListParams{Limit: 50,
		Filter: record.Filter{Kinds: []record.Kind{record.KindContractCreated}}})
	if err != nil || len(some) < 3 {
		t.Fatalf("contracts: %d %v", len(some), err)
	}
	contracts := []string{some[0].Contract.String(), some[2].Contract.String()}
	mid := fmt.Sprint(h.Handle.Head() / 2)

	followers := liveFollowers(contracts, mid)
	var final int64
	var mu sync.Mutex
	expected := map[*follower]int{}
	want := func(f *follower) func() int {
		return func() int { mu.Lock(); defer mu.Unlock(); return expected[f] }
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range followers {
		f.started = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.run(t, srv.URL, want(f), done)
		}()
	}
	// Appends and rollbacks while the subscribers catch up and go live.
	rollbacks := 0
	for range 300 {
		rb, err := feed.Step()
		if err != nil {
			t.Fatal(err)
		}
		if rb {
			rollbacks++
		}
		if rollbacks%3 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if err := feed.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	final = h.Handle.Head()
	for _, f := range followers {
		filter, _ := f.cmd.Filter.History()
		<-f.started
		exp, err := streamtest.Expected(ctx, h.Backend, filter, f.start, final)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		expected[f] = len(exp)
		mu.Unlock()
		t.Cleanup(func() {
			if f.err == nil {
				if err := streamtest.Same(f.got.Records, exp); err != nil {
					t.Errorf("%s (from %s): %v", f.name, f.start, err)
				}
			}
		})
	}
	close(done)
	wg.Wait()
	for _, f := range followers {
		if f.err != nil {
			t.Errorf("%s: %v", f.name, f.err)
		}
		if f.got.Dups > 0 {
			t.Errorf("%s: %d duplicates", f.name, f.got.Dups)
		}
		t.Logf("%s: from %s, %d records", f.name, f.start, len(f.got.Records))
	}
	if rollbacks == 0 {
		t.Fatal("no rollbacks happened")
	}
}

// liveFollowers are the subscribers of
// TestSnapshotThenLiveUnderAppendsAndRollbacks: filters of every kind,
// from the origin, a cursor (mid), a finished snapshot's cursor and the
// tip, batched by size and by time, some reconnecting.
func liveFollowers(contracts []string, mid string) []*follower {
	return []*follower{
		{name: "all from origin", cmd: protocol.Command{Stream: "a", Filter: &protocol.Filter{All: true}, BatchSize: 17}},
		{name: "two contracts from origin", cmd: protocol.Command{Stream: "c", Filter: &protocol.Filter{Contracts: contracts}}},
		{name: "kinds from a cursor", cmd: protocol.Command{Stream: "k", From: mid,
			Filter: &protocol.Filter{Kinds: []string{"inputs_applied", "rolled_back"}}, BatchSize: 5}},
		{name: "all from tip", cmd: protocol.Command{Stream: "t", From: "tip", Filter: &protocol.Filter{All: true}}},
		{name: "all from origin, batched by time", cmd: protocol.Command{Stream: "b", Filter: &protocol.Filter{All: true},
			BatchSize: 1000, BatchTimeout: protocol.Duration(20 * time.Millisecond)}},
		{name: "kinds from origin, reconnecting", reconnectEvery: 4, cmd: protocol.Command{Stream: "r", BatchSize: 3,
			Filter: &protocol.Filter{Kinds: []string{"inputs_applied", "rolled_back"}}}},
		{name: "all from a finished snapshot's cursor", cmd: protocol.Command{Stream: "s", From: mid + ":" + mid,
			Filter: &protocol.Filter{All: true}, BatchSize: 2}},
		{name: "markers only from origin (an empty snapshot)", reconnectEvery: 2, cmd: protocol.Command{Stream: "m", BatchSize: 2,
			Filter: &protocol.Filter{Kinds: []string{"rolled_back"}}}},
	}
}
