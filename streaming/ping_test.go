package streaming_test

import (
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// TestPingTimeoutDisconnects: the heartbeats ping every connection, one
// ping at a time each; a client that reads answers them and stays, one
// that does not read is disconnected ("ping timeout") once a ping goes
// unanswered for PingTimeout, and only it is.
func TestPingTimeoutDisconnects(t *testing.T) {
	h := streamingtest.NewHistory(t, "", nil)
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) {
		// Heartbeats far more often than the timeout: the reader answers
		// many pings before the deaf client's first one times out.
		c.HeartbeatInterval, c.PingTimeout, c.WriteTimeout = 20*time.Millisecond, 5*time.Second, 10*time.Minute
	}})
	reader := streamtest.Dial(t, srv.URL, nil)
	reader.Subscribe(protocol.Command{Stream: "r", Filter: &protocol.Filter{All: true}})
	subscribeBare(t, dialSmallBuffer(t, srv.URL), "deaf", 10) // never reads: answers no ping
	waitFor(t, "the deaf client disconnected for its ping", func() bool {
		return srv.Metric(t, "marlowe_streaming_disconnects_total") >= 1
	})
	if reasons := disconnectReasons(t, srv); len(reasons) != 1 || reasons[0] != protocol.ClosePingTimeout {
		t.Fatalf("disconnect reasons %v, want only %q", reasons, protocol.ClosePingTimeout)
	}
	waitFor(t, "the deaf client's connection gone", func() bool {
		return srv.Metric(t, "marlowe_streaming_connections") == 1
	})
	reader.Send(&protocol.Command{Type: protocol.TypePing})
	reader.Expect(protocol.TypePong, streamtest.IOLimit)
	if n := srv.Metric(t, "marlowe_streaming_disconnects_total"); n != 1 {
		t.Fatalf("%v disconnects, want the deaf client's only", n)
	}
}
