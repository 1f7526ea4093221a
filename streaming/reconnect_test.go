package streaming_test

import (
	"testing"
	"time"

	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// TestReconnectAfterAckSendsNothingTwice: 200 times a client reconnects to
// a durable stream at once after an ack: the new connection subscribes,
// the old one is dropped without a close handshake, and the client takes
// and acknowledges two batches on the new one. Every batch it gets is the
// next one: no record comes twice (none it acknowledged, none it saw), none
// is skipped, seqs only go up on every connection. A batch that went out
// to the dropped connection after its last ack, which the client never
// read, comes once to the new one, marked redelivered (it went out before).
func TestReconnectAfterAckSendsNothingTwice(t *testing.T) {
	const cycles, batch = 200, 3
	sf := newSeedFixture(t, cycles*batch*2+200)
	sub := protocol.Command{Stream: "reconnect", Durable: true, Filter: &protocol.Filter{All: true}, BatchSize: batch}
	last, resent, flagged := int64(0), 0, 0
	var prev *streamtest.Raw
	for i := range cycles {
		raw := streamtest.Dial(t, sf.srv.URL, nil)
		raw.Subscribe(sub)
		if prev != nil {
			_ = prev.WS.CloseNow()
		}
		for range 2 {
			f := raw.Next(10 * time.Second)
			if f.Type != protocol.TypeBatch {
				t.Fatalf("cycle %d: a %s frame: %+v", i, f.Type, f)
			}
			if f.Redelivered {
				flagged++
			}
			again := false
			for _, r := range f.Records {
				switch {
				case r.Seq <= last:
					again = true
				case r.Seq != last+1:
					t.Fatalf("cycle %d: batch %d skips from seq %d to %d", i, f.Batch, last, r.Seq)
				default:
					last = r.Seq
				}
			}
			if again {
				resent++
				t.Errorf("cycle %d: batch %d (seqs %d-%d, redelivered %v) after seq %d: sent again", i, f.Batch,
					f.Records[0].Seq, f.Records[len(f.Records)-1].Seq, f.Redelivered, last)
			}
			raw.Ack(f)
		}
		prev = raw
	}
	t.Logf("%d batches, %d of them first sent to a dropped connection that never read them", 2*cycles, flagged)
	if resent > 0 {
		t.Fatalf("%d of %d batches sent again", resent, 2*cycles)
	}
	if got := sf.srv.Metric(t, "marlowe_streaming_stale_acks_total"); got != 0 {
		t.Fatalf("%v acks counted as stale", got)
	}
	sf.noWarnings(t)
}
