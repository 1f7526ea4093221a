package streaming_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// cutAtAck is a stream store whose database goes away exactly between an
// acknowledgement and its store: once armed, the next StreamAck fails, and
// so does every call after it until the test restores the database.
type cutAtAck struct {
	partitionable
	armed  atomic.Bool
	failed atomic.Int32 // StreamAck calls that failed
}

func (c *cutAtAck) StreamAck(ctx context.Context, a *streamstore.StreamAckParams) error {
	if c.armed.CompareAndSwap(true, false) {
		c.cut.Store(true)
	}
	if c.cut.Load() {
		c.failed.Add(1)
		return errPartitioned
	}
	return c.Store.StreamAck(ctx, a)
}

// TestDurableAckStoreFailureNeverStepsBack: the database goes away between
// an acknowledgement and its store, and comes back. The stream never steps
// back on the connection (the soak saw "seq 45 after 80 on one connection":
// the failed store left the old cursor in the database, the next lease read
// it and the stream went back to it), it goes on after the acknowledged
// batch, and the acknowledged cursor and record count reach the database
// once it answers again (the store is retried), without another ack. With
// a round-trip lease (several processes on one database) and without (one
// process), on SQLite and PostgreSQL.
func TestDurableAckStoreFailureNeverStepsBack(t *testing.T) {
	ctx := context.Background()
	h := streamingtest.NewHistory(t, "", nil)
	newFeed(t, h, 7, 0, 200, false)
	stores := map[string]func(t *testing.T) streamstore.Store{
		"sqlite":   func(t *testing.T) streamstore.Store { return sqliteStreams(t, t.TempDir()) },
		"postgres": func(t *testing.T) streamstore.Store { return postgresStreams(t)() },
	}
	for _, db := range []string{"sqlite", "postgres"} {
		for _, lease := range []bool{true, false} {
			name := db + "/single"
			if lease {
				name = db + "/leased"
			}
			t.Run(name, func(t *testing.T) {
				store := &cutAtAck{partitionable: partitionable{Store: stores[db](t)}}
				opts := streamingtest.ServerOptions{Streams: store}
				if lease {
					opts.Config = leased("process-a")
				}
				srv := streamingtest.StartServer(t, h, opts)
				start := record.Cursor{Snapshot: h.Handle.Head()}
				want, err := streamtest.Expected(ctx, h.Backend, record.Filter{}, start, h.Handle.Head())
				if err != nil {
					t.Fatal(err)
				}
				raw := streamtest.Dial(t, srv.URL, nil)
				raw.Subscribe(protocol.Command{Stream: "cut", Durable: true, Filter: &protocol.Filter{All: true}, BatchSize: 7})
				var got streamtest.Collector
				var last int64 // the newest seq on this connection
				var lastAcked *protocol.Frame
				read := func() *protocol.Frame {
					t.Helper()
					f := raw.Next(10 * time.Second)
					if f.Type != protocol.TypeBatch {
						t.Fatalf("got a %s frame (%+v), want a batch", f.Type, f)
					}
					for _, r := range f.Records {
						if r.Seq <= last {
							t.Fatalf("seq %d after %d on one connection: the stream stepped back", r.Seq, last)
						}
						last = r.Seq
					}
					if err := got.Add(f.Records); err != nil {
						t.Fatal(err)
					}
					return f
				}
				stored := func(f *protocol.Frame, records int) func() bool {
					return func() bool {
						s, err := store.Store.StreamGet(ctx, "cut")
						return err == nil && s.Cursor == f.Cursor && s.Records == int64(records)
					}
				}
				var f *protocol.Frame
				for range 3 {
					f = read()
					raw.Ack(f)
				}
				waitFor(t, "the third ack stored", stored(f, len(got.Records)))
				// The next ack's store finds the database gone.
				store.armed.Store(true)
				f = read()
				raw.Ack(f)
				lastAcked = f
				waitFor(t, "the ack's store to fail", func() bool { return store.failed.Load() >= 1 })
				if !lease {
					// One process: the stream goes on meanwhile.
					f = read()
					raw.Ack(f)
					lastAcked = f
				}
				store.cut.Store(false)
				// The stream goes on after the acknowledged batch; without a
				// further ack the acknowledged cursor reaches the database:
				// the failed store was retried.
				acked := len(got.Records)
				next := read() // after the acknowledged batch, on the same connection
				waitFor(t, "the acknowledged cursor in the database", stored(lastAcked, acked))
				raw.Ack(next)
				for len(got.Records) < len(want) {
					f := read()
					raw.Ack(f)
				}
				if err := streamtest.Same(got.Records, want); err != nil {
					t.Fatal(err)
				}
				if got.Dups != 0 {
					t.Fatalf("%d records twice", got.Dups)
				}
				if n := srv.Metric(t, "marlowe_streaming_leases_lost_total"); n != 0 {
					t.Errorf("%.0f leases lost: no other process took the stream", n)
				}
			})
		}
	}
}
