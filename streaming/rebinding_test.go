package streaming_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// TestDeleteStreamFromARebindingPage: an open service (no token) on
// loopback, and a page whose name the attacker rebinds to 127.0.0.1: its
// DELETE /streams/{name} carries the attacker's Origin and Host, and is
// refused with 403 origin_not_allowed (the stream stays), as is one from
// any other origin not allowed; an allowed origin, a page of the port's
// own address and a program (no Origin) delete.
func TestDeleteStreamFromARebindingPage(t *testing.T) {
	srv := newSeedFixtureConfig(t, 10, func(c *streaming.Config) {
		c.Origins = []string{"https://dapp.example"}
	}).srv
	names := []string{"allowed", "own", "program", "victim"}
	for _, name := range names {
		raw := streamtest.Dial(t, srv.URL, nil)
		raw.Subscribe(protocol.Command{Stream: name, Durable: true, Filter: &protocol.Filter{All: true}})
		raw.Expect(protocol.TypeBatch, 5*time.Second)
	}
	api := httptest.NewServer(srv.StreamsHandler())
	defer api.Close()
	p := strconv.Itoa(api.Listener.Addr().(*net.TCPAddr).Port)
	do := func(method, name, origin, host string) (int, string) {
		t.Helper()
		req := newRequest(t, method, api.URL+"/streams/"+name, nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if host != "" {
			req.Host = host
		}
		resp, body := roundTrip(t, req)
		return resp.StatusCode, body
	}
	for _, c := range []struct{ origin, host string }{
		{"http://evil.example:" + p, "evil.example:" + p}, // DNS rebinding: Origin and Host the attacker's
		{"http://evil.example", "evil.example"},
		{"https://evil.example", ""},
		{"http://127.0.0.1:1", ""}, // another port of this machine
		{"null", ""},
	} {
		code, body := do(http.MethodDelete, "victim", c.origin, c.host)
		if code != http.StatusForbidden || !strings.Contains(body, "origin_not_allowed") || !strings.Contains(body, "streaming.origins") {
			t.Errorf("DELETE from Origin %q, Host %q: %d %s", c.origin, c.host, code, body)
		}
	}
	if code, body := do(http.MethodGet, "victim", "", ""); code != http.StatusOK {
		t.Fatalf("the stream is gone after the refused deletes: %d %s", code, body)
	}
	for name, origin := range map[string]string{"allowed": "https://dapp.example", "own": "http://127.0.0.1:" + p, "program": ""} {
		if code, body := do(http.MethodDelete, name, origin, ""); code != http.StatusNoContent {
			t.Errorf("DELETE %s from Origin %q: %d %s", name, origin, code, body)
		}
		if code, _ := do(http.MethodGet, name, "", ""); code != http.StatusNotFound {
			t.Errorf("%s not deleted: %d", name, code)
		}
	}
}
