package streaming_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// dialSmallBuffer connects with a tiny socket receive buffer, so that a
// client that does not read fills up quickly.
func dialSmallBuffer(t *testing.T, url string) *websocket.Conn {
	return dialSocketBuffer(t, url, 4096)
}

// dialSocketBuffer dials url with the client socket's receive buffer
// (and so the TCP window) set to size bytes, which keeps what the kernels
// hold of a client that does not read small.
func dialSocketBuffer(t *testing.T, url string, size int) *websocket.Conn {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(size)
		}
		return c, err
	}}
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), streamtest.IOLimit)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(-1)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return ws
}

// TestSlowClientCutOffFastOneKeepsUp: a client that stops reading is
// disconnected with a named reason while a fast client on the same server
// receives every record, old and new, and the store keeps committing.
func TestSlowClientCutOffFastOneKeepsUp(t *testing.T) {
	ctx := context.Background()
	h := streamingtest.NewHistory(t, "", nil)
	feed := newFeed(t, h, 9, 0, 100, true)
	replicate(t, feed, 6000, 50) // about 10 MB of records
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) {
		c.SendQueueFrames, c.SendQueueBytes, c.WriteTimeout = 4, 256<<10, 500*time.Millisecond
	}})

	subscribeBare(t, dialSmallBuffer(t, srv.URL), "s", 100)
	fast := streamtest.Dial(t, srv.URL, nil)
	fast.Subscribe(protocol.Command{Stream: "f", Filter: &protocol.Filter{All: true}, BatchSize: 500})
	var got streamtest.Collector
	started := time.Now()
	// Live appends meanwhile: the store must not wait for anyone.
	feed.FarTip = false
	if err := feed.Replicate(500, 5); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := feed.Wait(waitCtx); err != nil {
		t.Fatalf("the store waited for a client: %v", err)
	}
	want := int(h.Handle.Head())
	drain(t, fast, &got, want)
	t.Logf("fast client: %d records in %s", len(got.Records), time.Since(started))
	waitFor(t, "the slow client to be cut off", func() bool {
		return srv.Metric(t, "marlowe_streaming_slow_clients_dropped_total") >= 1
	})
	// The reason is named in the metrics (and in the close frame, which a
	// client that does not read may never see).
	reasons := disconnectReasons(t, srv)
	if fmt.Sprint(reasons) != "["+protocol.CloseSlowConsumer+"]" {
		t.Fatalf("disconnect reasons %v", reasons)
	}
	if got.Dups != 0 {
		t.Fatalf("%d duplicates", got.Dups)
	}
}

// TestProtocolErrors: malformed frames get error frames, repeated abuse
// closes the socket with a named reason.
func TestProtocolErrors(t *testing.T) {
	sf := newSeedFixture(t, 5)
	raw := streamtest.Dial(t, sf.srv.URL, nil)
	cases := []struct{ frame, code string }{
		{`{not json`, protocol.CodeBadJSON},
		{`{"type":"dance"}`, protocol.CodeUnknownType},
		{`{"stream":"x"}`, protocol.CodeBadRequest},
		{`{"type":"subscribe","stream":"x"}`, protocol.CodeBadFilter},
		{`{"type":"subscribe","stream":"x","filter":{}}`, protocol.CodeBadFilter},
		{`{"type":"subscribe","stream":"x","filter":{"all":true,"tags":["a"]}}`, protocol.CodeBadFilter},
		{`{"type":"subscribe","stream":"x","filter":{"contracts":["nope"]}}`, protocol.CodeBadFilter},
		{`{"type":"subscribe","stream":"x","filter":{"all":true},"from":"yesterday"}`, protocol.CodeBadCursor},
		{`{"type":"subscribe","stream":"x","filter":{"all":true},"from":"999999"}`, protocol.CodeBadCursor},
		{`{"type":"subscribe","stream":"x","filter":{"all":true},"mode":"fast"}`, protocol.CodeBadRequest},
		{`{"type":"subscribe","stream":"x","filter":{"all":true},"batchSize":100000}`, protocol.CodeBadRequest},
		{`{"type":"subscribe","stream":"x","filter":{"all":true},"filters":1}`, protocol.CodeBadJSON},
		{`{"type":"subscribe","stream":"bad name!","durable":true,"filter":{"all":true}}`, protocol.CodeBadRequest},
		{`{"type":"unsubscribe","stream":"ghost"}`, protocol.CodeUnknownStream},
	}
	for i, c := range cases {
		if i == 9 {
			// Over MaxBadFrames: use a fresh connection for the rest.
			raw = streamtest.Dial(t, sf.srv.URL, nil)
		}
		raw.SendText(c.frame)
		f := raw.Expect(protocol.TypeError, 5*time.Second)
		if f.Code != c.code {
			t.Errorf("%s: got %s (%s), want %s", c.frame, f.Code, f.Message, c.code)
		}
	}
	// An ack of an unknown stream is answered but does not count as abuse.
	raw.Send(&protocol.Command{Type: protocol.TypeAck, Stream: "ghost", Batch: 1})
	if f := raw.Expect(protocol.TypeError, 5*time.Second); f.Code != protocol.CodeUnknownStream {
		t.Fatalf("%+v", f)
	}
	raw.Send(&protocol.Command{Type: protocol.TypePing})
	if f := raw.Expect(protocol.TypePong, 5*time.Second); f.Tip == nil || f.Tip.Seq != sf.h.Handle.Head() {
		t.Fatalf("pong %+v", f)
	}
	// Binary frames are refused; the tenth bad frame closes the socket.
	abuse := streamtest.Dial(t, sf.srv.URL, nil)
	for i := range streaming.DefaultMaxBadFrames {
		if err := abuse.WS.Write(context.Background(), websocket.MessageBinary, []byte{1, 2, 3}); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	for {
		f, err := abuse.TryRead(5 * time.Second)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason != protocol.CloseTooManyErrors {
				t.Fatalf("closed with %v", err)
			}
			break
		}
		if f.Type != protocol.TypeError || f.Code != protocol.CodeBadFrame {
			t.Fatalf("%+v", f)
		}
	}
}

// TestLimits: frame size, subscriptions per connection, and duplicate
// stream names; unsubscribe frees a slot.
func TestLimits(t *testing.T) {
	h := streamingtest.NewHistory(t, "", nil)
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) {
		c.MaxSubscriptions, c.MaxFrameBytes = 2, 1024
	}})
	raw := streamtest.Dial(t, srv.URL, nil)
	raw.Subscribe(protocol.Command{Stream: "a", Filter: &protocol.Filter{All: true}})
	raw.Send(&protocol.Command{Type: protocol.TypeSubscribe, Stream: "a", Filter: &protocol.Filter{All: true}})
	if f := raw.Expect(protocol.TypeError, 5*time.Second); f.Code != protocol.CodeStreamExists {
		t.Fatalf("%+v", f)
	}
	raw.Subscribe(protocol.Command{Stream: "b", Filter: &protocol.Filter{All: true}})
	raw.Send(&protocol.Command{Type: protocol.TypeSubscribe, Stream: "c", Filter: &protocol.Filter{All: true}})
	if f := raw.Expect(protocol.TypeError, 5*time.Second); f.Code != protocol.CodeTooManySubscriptions {
		t.Fatalf("%+v", f)
	}
	raw.Send(&protocol.Command{Type: protocol.TypeUnsubscribe, Stream: "a"})
	raw.Expect(protocol.TypeUnsubscribed, 5*time.Second)
	raw.Subscribe(protocol.Command{Stream: "c", Filter: &protocol.Filter{All: true}})
	raw.Send(&protocol.Command{Type: protocol.TypeUnsubscribe, Stream: "c"})
	raw.Expect(protocol.TypeUnsubscribed, 5*time.Second)
	// Durable streams need a stream store.
	raw.Send(&protocol.Command{Type: protocol.TypeSubscribe, Stream: "d", Durable: true, Filter: &protocol.Filter{All: true}})
	if f := raw.Expect(protocol.TypeError, 5*time.Second); f.Code != protocol.CodeDurableUnavailable {
		t.Fatalf("%+v", f)
	}
	big := fmt.Sprintf(`{"type":"ping","reason":%q}`, strings.Repeat("x", 2000))
	raw.SendText(big)
	_, err := raw.TryRead(5 * time.Second)
	for err == nil {
		_, err = raw.TryRead(5 * time.Second)
	}
	if st := websocket.CloseStatus(err); st != websocket.StatusMessageTooBig {
		t.Fatalf("after a large frame: %v", err)
	}
}

// TestAuthAndOrigin: the bearer token (header or access_token) and the
// origin check.
func TestAuthAndOrigin(t *testing.T) {
	h := streamingtest.NewHistory(t, "", nil)
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) {
		c.Token, c.Origins = "s3cret", []string{"https://dapp.example"}
	}})
	ctx := context.Background()
	dial := func(url string, hdr http.Header) (int, error) {
		ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: hdr})
		if ws != nil {
			_ = ws.CloseNow()
		}
		if resp == nil {
			return 0, err
		}
		return resp.StatusCode, err
	}
	bearer := http.Header{"Authorization": {"Bearer s3cret"}}
	if code, _ := dial(srv.URL, nil); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := dial(srv.URL, http.Header{"Authorization": {"Bearer wrong"}}); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	if code, err := dial(srv.URL, bearer); err != nil || code != http.StatusSwitchingProtocols {
		t.Fatalf("token: %d %v", code, err)
	}
	if code, err := dial(srv.URL+"?access_token=s3cret", nil); err != nil || code != http.StatusSwitchingProtocols {
		t.Fatalf("access_token: %d %v", code, err)
	}
	evil := http.Header{"Authorization": {"Bearer s3cret"}, "Origin": {"https://evil.example"}}
	if code, _ := dial(srv.URL, evil); code != http.StatusForbidden {
		t.Fatalf("foreign origin: %d", code)
	}
	good := http.Header{"Authorization": {"Bearer s3cret"}, "Origin": {"https://dapp.example"}}
	if code, err := dial(srv.URL, good); err != nil || code != http.StatusSwitchingProtocols {
		t.Fatalf("allowed origin: %d %v", code, err)
	}
}

// TestWebSocketOrigins: a browser's Origin is checked against the allowed
// origins and the server's own listening address, never the Host header.
func TestWebSocketOrigins(t *testing.T) {
	h := streamingtest.NewHistory(t, "", nil)
	ctx := context.Background()
	dial := func(url, origin, host string) (int, string) {
		t.Helper()
		opts := &websocket.DialOptions{Host: host}
		if origin != "" {
			opts.HTTPHeader = http.Header{"Origin": {origin}}
		}
		ws, resp, err := websocket.Dial(ctx, url, opts)
		if ws != nil {
			_ = ws.CloseNow()
		}
		if resp == nil {
			t.Fatalf("dial %s from %q: %v", url, origin, err)
		}
		var body []byte
		if resp.Body != nil {
			body, _ = io.ReadAll(resp.Body)
		}
		return resp.StatusCode, string(body)
	}
	port := func(srv *streamingtest.Server) string { return strconv.Itoa(srv.Addr().(*net.TCPAddr).Port) }

	listed := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) {
		c.Origins = []string{"https://dapp.example", "http://localhost:5173"}
	}})
	p := port(listed)
	evilHost := "evil.example:" + p
	for _, c := range []struct {
		origin, host string
		want         int
	}{
		{"", "", http.StatusSwitchingProtocols},                                       // a program
		{"https://dapp.example", "", http.StatusSwitchingProtocols},                   // listed
		{"https://DAPP.example:443", "", http.StatusSwitchingProtocols},               // the same origin spelled otherwise
		{"http://localhost:5173", "", http.StatusSwitchingProtocols},                  // listed
		{"http://127.0.0.1:" + p, "", http.StatusSwitchingProtocols},                  // the server's own address
		{"http://localhost:" + p, "", http.StatusSwitchingProtocols},                  // a name of it
		{"https://evil.example", "", http.StatusForbidden},                            // not listed
		{"http://dapp.example", "", http.StatusForbidden},                             // another scheme
		{"http://localhost:5174", "", http.StatusForbidden},                           // another port
		{"null", "", http.StatusForbidden},                                            // a sandboxed page
		{"http://" + evilHost, evilHost, http.StatusForbidden},                        // DNS rebinding: Host equals Origin
		{"http://evil.example", "evil.example", http.StatusForbidden},                 // the same without a port
		{"http://localhost:" + p, "evil.example:" + p, http.StatusSwitchingProtocols}, // Host does not matter either way
	} {
		code, body := dial(listed.URL, c.origin, c.host)
		if code != c.want {
			t.Errorf("Origin %q, Host %q: %d, want %d (%s)", c.origin, c.host, code, c.want, body)
		}
		if code == http.StatusForbidden && (!strings.Contains(body, c.origin) || !strings.Contains(body, "streaming.origins")) {
			t.Errorf("Origin %q: the refusal does not say why: %q", c.origin, body)
		}
	}

	// Nothing configured: the server's own origins only.
	own := streamingtest.StartServer(t, h, streamingtest.ServerOptions{})
	p = port(own)
	for origin, want := range map[string]int{
		"http://127.0.0.1:" + p: http.StatusSwitchingProtocols, "http://[::1]:" + p: http.StatusSwitchingProtocols,
		"http://localhost:" + p: http.StatusSwitchingProtocols, "https://dapp.example": http.StatusForbidden,
		"http://127.0.0.1:1": http.StatusForbidden, "http://evil.example:" + p: http.StatusForbidden,
	} {
		if code, body := dial(own.URL, origin, ""); code != want {
			t.Errorf("default, Origin %q: %d, want %d (%s)", origin, code, want, body)
		}
	}
	if code, _ := dial(own.URL, "http://evil.example:"+p, "evil.example:"+p); code != http.StatusForbidden {
		t.Errorf("default, DNS rebinding: %d", code)
	}

	// *: any origin.
	anyOrigin := streamingtest.StartServer(t, h, streamingtest.ServerOptions{Config: func(c *streaming.Config) { c.Origins = []string{"*"} }})
	for _, origin := range []string{"https://evil.example", "null", "http://localhost:1"} {
		if code, body := dial(anyOrigin.URL, origin, ""); code != http.StatusSwitchingProtocols {
			t.Errorf("*, Origin %q: %d (%s)", origin, code, body)
		}
	}

	// Bad origins are refused by New.
	cfg := streamingtest.TestConfig()
	cfg.Origins = []string{"dapp.example"}
	if _, err := streaming.New(cfg, streaming.Deps{History: h.Handle}); err == nil || !strings.Contains(err.Error(), `"dapp.example"`) {
		t.Errorf("a bad origin: %v", err)
	}
}

// TestHeartbeatsCarryTheTip: an idle subscriber sees heartbeats with the
// head seq.
func TestHeartbeatsCarryTheTip(t *testing.T) {
	sf := newSeedFixture(t, 5)
	raw := streamtest.Dial(t, sf.srv.URL, nil)
	raw.Subscribe(protocol.Command{Stream: "idle", From: "tip", Filter: &protocol.Filter{All: true}})
	f := raw.Read(5 * time.Second)
	if f.Type != protocol.TypeHeartbeat || f.Tip == nil || f.Tip.Seq != sf.h.Handle.Head() || f.Tip.BlockNo != 1 {
		t.Fatalf("%+v", f)
	}
}

// FuzzServerFrames sends random frames (NUL-separated in the input; a
// leading 0x01 makes a frame binary) to a running server: it must answer
// each connection's closing ping, or have closed the connection for
// abuse, and never panic; the goroutine leak check of TestMain runs after.
func FuzzServerFrames(f *testing.F) {
	for _, s := range []string{
		`{"type":"ping"}`,
		`{"type":"subscribe","stream":"a","filter":{"all":true}}` + "\x00" + `{"type":"ack","stream":"a","batch":1}`,
		`{"type":"subscribe","stream":"d","durable":true,"filter":{"kinds":["rolled_back"]},"mode":"broadcast"}`,
		`{"type":"subscribe","stream":"a","filter":{"all":true},"from":"3:1","batchSize":1,"batchTimeout":"5ms"}` + "\x00" +
			`{"type":"nack","stream":"a","batch":1,"reason":"x"}` + "\x00" + `{"type":"unsubscribe","stream":"a"}`,
		`{"type":"subscribe","stream":"x","filter":{"partyRoles":[{"currency":"00","name":"\u0000zz"}]}}`,
		"\x01\x00\xff" + "\x00" + `{"type":`,
		`[1,2]` + "\x00" + `null` + "\x00" + `{"type":"ack","stream":"a","batch":-1}`,
	} {
		f.Add([]byte(s))
	}
	h := streamingtest.NewHistory(f, "", nil)
	newFeed(f, h, 11, 5, 20, false)
	streams := sqliteStreams(f, h.Dir)
	srv := streamingtest.StartServer(f, h, streamingtest.ServerOptions{Streams: streams, Config: func(c *streaming.Config) {
		c.MaxFrameBytes = 4096
	}})
	f.Fuzz(func(t *testing.T, data []byte) {
		raw := streamtest.Dial(t, srv.URL, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, frame := range bytes.Split(data, []byte{0}) {
			typ := websocket.MessageText
			if len(frame) > 0 && frame[0] == 1 {
				typ, frame = websocket.MessageBinary, frame[1:]
			}
			if err := raw.WS.Write(ctx, typ, frame); err != nil {
				return // closed for abuse or a frame too large
			}
		}
		if err := raw.WS.Write(ctx, websocket.MessageText, []byte(`{"type":"ping"}`)); err != nil {
			return
		}
		for {
			fr, err := raw.TryRead(5 * time.Second)
			if err != nil {
				var ce websocket.CloseError
				if errors.As(err, &ce) && (ce.Code == websocket.StatusPolicyViolation || ce.Code == websocket.StatusMessageTooBig) {
					return
				}
				t.Fatalf("no pong: %v", err)
			}
			if fr.Type == protocol.TypePong {
				return
			}
		}
	})
}
