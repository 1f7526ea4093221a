package streaming_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/query"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// TestHeaderLimitsMatchTheQueryPort: the streaming port refuses request
// headers larger than the query port's limit with 431, and cuts a client
// that trickles its headers after the query port's read-header timeout.
func TestHeaderLimitsMatchTheQueryPort(t *testing.T) {
	if streaming.DefaultMaxHeaderBytes != query.DefaultMaxHeaderBytes ||
		streaming.DefaultReadHeaderTimeout != query.DefaultReadHeaderTimeout {
		t.Fatalf("streaming header limits %d bytes, %s; query port %d bytes, %s", streaming.DefaultMaxHeaderBytes,
			streaming.DefaultReadHeaderTimeout, query.DefaultMaxHeaderBytes, query.DefaultReadHeaderTimeout)
	}
	if c := streaming.DefaultConfig(); c.MaxHeaderBytes != query.DefaultMaxHeaderBytes || c.ReadHeaderTimeout != query.DefaultReadHeaderTimeout {
		t.Fatalf("DefaultConfig: %d bytes, %s", c.MaxHeaderBytes, c.ReadHeaderTimeout)
	}
	h := streamingtest.NewHistory(t, "", nil)
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) {
		c.ReadHeaderTimeout = 300 * time.Millisecond
	}})
	base := "http://" + srv.Addr().String() + "/"

	// A header of twice the limit: 431, as on the query port.
	req, _ := http.NewRequest(http.MethodGet, base, nil)
	req.Header.Set("X-Big", strings.Repeat("a", 2*streaming.DefaultMaxHeaderBytes))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a %d-byte header: %s, want 431", 2*streaming.DefaultMaxHeaderBytes, resp.Status)
	}
	// Below the limit the request reaches the WebSocket endpoint (which
	// wants an upgrade).
	req.Header.Set("X-Big", strings.Repeat("a", streaming.DefaultMaxHeaderBytes/2))
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a %d-byte header refused: %s", streaming.DefaultMaxHeaderBytes/2, resp.Status)
	}

	// A client that sends a header line every 100 ms (a whole request
	// would take 6 s) is cut off before it completes the request.
	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	closed := make(chan error, 1)
	go func() {
		_ = nc.SetReadDeadline(time.Now().Add(time.Minute))
		_, err := io.Copy(io.Discard, nc)
		closed <- err
	}()
	if _, err := io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	cut := false
	for i := 0; i < 60 && !cut; i++ {
		select {
		case err := <-closed:
			// The server closed it: at the end of the data (EOF) or, with
			// the client's headers unread, with a reset.
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("reading the trickling connection: %v", err)
			}
			cut = true
		case <-time.After(100 * time.Millisecond):
			if _, err := io.WriteString(nc, "X-Slow: 1\r\n"); err != nil {
				cut = true
			}
		}
	}
	if !cut {
		t.Fatal("a client trickling its request headers was not cut off")
	}
}

// TestSlowConsumerGetsCloseFrame: a client that stops reading is cut off
// with a close frame naming the reason ("slow consumer", 1008), which it
// reads after the frames queued before it, when it reads again; not a bare
// end of the connection.
func TestSlowConsumerGetsCloseFrame(t *testing.T) {
	ctx := context.Background()
	h := streamingtest.NewHistory(t, "", nil)
	feed := newFeed(t, h, 9, 0, 100, true)
	// About 10 MB of records: more than the socket buffers of both ends
	// hold (the client's window is 64 KiB, the server's send buffer grows
	// to 4 MiB at most), so that the server's writes stop while the client
	// does not read. (With the default window the client's buffer grows to
	// 32 MiB, and a history of 40 MB was barely more than both.)
	replicate(t, feed, 6000, 50)
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) {
		c.SendQueueFrames, c.SendQueueBytes, c.WriteTimeout = 4, 256<<10, 300*time.Millisecond
	}})
	slow := dialSocketBuffer(t, srv.URL, 64<<10)
	subscribeBare(t, slow, "s", 100)
	waitFor(t, "the slow client to be cut off", func() bool {
		return srv.Metric(t, "marlowe_streaming_slow_clients_dropped_total") >= 1
	})
	frames := 0
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _, err := slow.Read(rctx)
		cancel()
		if err == nil {
			frames++
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("after %d frames the connection ended without a close frame: %v", frames, err)
		}
		if ce.Code != websocket.StatusPolicyViolation || ce.Reason != protocol.CloseSlowConsumer {
			t.Fatalf("close frame %d %q, want %d %q", ce.Code, ce.Reason, websocket.StatusPolicyViolation, protocol.CloseSlowConsumer)
		}
		t.Logf("%d frames, then the close frame", frames)
		return
	}
}
