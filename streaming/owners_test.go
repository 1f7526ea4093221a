package streaming_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// TestStreamStealingRefused is the attack of issue 13: a second client
// knows the name of a consumer's durable stream and tries to attach to it,
// acknowledge its batches, list, read and delete it, with another token
// and with none. Every attempt is refused, the stream's name does not
// appear in the metrics, and the owner receives every record exactly once.
func TestStreamStealingRefused(t *testing.T) {
	ctx := context.Background()
	sf := newSeedFixtureConfig(t, 200, func(c *streaming.Config) {
		c.Tokens = []auth.Token{
			{Name: "alice", Secret: "alice-secret-0123"},
			{Name: "mallory", Secret: "mallory-secret-0123"},
			{Name: "ops", Secret: "ops-secret-0123", Scopes: []auth.Scope{auth.ScopeAdmin}},
		}
	})
	h, srv := sf.h, sf.srv
	bearer := func(secret string) http.Header { return http.Header{"Authorization": {"Bearer " + secret}} }
	want, err := streamtest.Expected(ctx, h.Backend, record.Filter{}, record.Cursor{Snapshot: h.Handle.Head()}, h.Handle.Head())
	if err != nil {
		t.Fatal(err)
	}
	cmd := protocol.Command{Stream: "orders", Durable: true, Filter: &protocol.Filter{All: true}, BatchSize: 10}

	alice := streamtest.Dial(t, srv.URL, bearer("alice-secret-0123"))
	alice.Subscribe(cmd)
	var got streamtest.Collector
	first := alice.Expect(protocol.TypeBatch, 10*time.Second)
	if err := got.Add(first.Records); err != nil {
		t.Fatal(err)
	}

	// Mallory attaches by name (with or without the filter) and acks.
	mallory := streamtest.Dial(t, srv.URL, bearer("mallory-secret-0123"))
	for _, c := range []protocol.Command{cmd, {Stream: "orders", Durable: true}} {
		c.Type = protocol.TypeSubscribe
		mallory.Send(&c)
		if f := mallory.Expect(protocol.TypeError, 5*time.Second); f.Code != protocol.CodeForbidden {
			t.Fatalf("mallory's subscribe: %+v", f)
		}
	}
	mallory.Send(&protocol.Command{Type: protocol.TypeAck, Stream: "orders", Batch: first.Batch})
	if f := mallory.Expect(protocol.TypeError, 5*time.Second); f.Code != protocol.CodeUnknownStream {
		t.Fatalf("mallory's ack: %+v", f)
	}
	// No token: no WebSocket at all.
	anon, err := http.Get(strings.Replace(srv.URL, "ws://", "http://", 1))
	if err != nil {
		t.Fatal(err)
	}
	anon.Body.Close()
	if anon.StatusCode != http.StatusUnauthorized {
		t.Fatalf("WebSocket without a token: %s", anon.Status)
	}

	// The HTTP routes: listing, reading and deleting.
	api := httptest.NewServer(srv.StreamsHandler())
	defer api.Close()
	do := func(method, path string, header http.Header) (int, string) {
		t.Helper()
		resp, body := roundTrip(t, newRequest(t, method, api.URL+path, header))
		return resp.StatusCode, body
	}
	for _, tc := range []struct {
		method, path string
		header       http.Header
		status       int
		contains     string
	}{
		{"GET", "/streams", bearer("mallory-secret-0123"), 200, `"streams":[]`},
		{"GET", "/streams/orders", bearer("mallory-secret-0123"), 404, "not_found"},
		{"DELETE", "/streams/orders", bearer("mallory-secret-0123"), 404, "not_found"},
		{"GET", "/streams", nil, 401, "unauthorized"},
		{"GET", "/streams/orders", nil, 401, "unauthorized"},
		{"DELETE", "/streams/orders", nil, 401, "unauthorized"},
		{"DELETE", "/streams/orders?access_token=nope", nil, 401, "unauthorized"},
		{"GET", "/streams", bearer("alice-secret-0123"), 200, `"name":"orders"`},
		{"GET", "/streams/orders?access_token=alice-secret-0123", nil, 200, `"name":"orders"`},
		{"GET", "/streams", bearer("ops-secret-0123"), 200, `"name":"orders"`},
	} {
		if status, body := do(tc.method, tc.path, tc.header); status != tc.status || !strings.Contains(body, tc.contains) {
			t.Errorf("%s %s as %v: %d %s, want %d with %s", tc.method, tc.path, tc.header, status, body, tc.status, tc.contains)
		}
	}

	// The metrics name the owner, never the stream.
	metricsNameTheOwner(t, srv, "alice", "orders")

	// Alice, who alone acknowledged, receives every record exactly once.
	alice.Ack(first)
	drain(t, alice, &got, len(want))
	if err := streamtest.Same(got.Records, want); err != nil || got.Dups != 0 {
		t.Fatalf("alice's records: %v (%d duplicates)", err, got.Dups)
	}
	// Alice may delete her stream; then it is gone for everyone.
	if status, body := do("DELETE", "/streams/orders", bearer("alice-secret-0123")); status != 204 {
		t.Fatalf("alice's delete: %d %s", status, body)
	}
	if status, _ := do("GET", "/streams/orders", bearer("ops-secret-0123")); status != 404 {
		t.Fatalf("after the delete: %d", status)
	}
}

// TestScopes: a token without the subscribe scope may not open ephemeral
// subscriptions or /events; one without the streams scope no durable
// stream; an admin token may start another owner's stream.
func TestScopes(t *testing.T) {
	sf := newSeedFixture(t, 20)
	srv := streamingtest.StartServer(t, sf.h, streamingtest.ServerOptions{Streams: nil, Config: func(c *streaming.Config) {
		c.Tokens = []auth.Token{
			{Name: "durable-only", Secret: "d-secret", Scopes: []auth.Scope{auth.ScopeStreams}},
			{Name: "reader", Secret: "r-secret", Scopes: []auth.Scope{auth.ScopeSubscribe}},
		}
	}})
	d := streamtest.Dial(t, srv.URL, http.Header{"Authorization": {"Bearer d-secret"}})
	d.Send(&protocol.Command{Type: protocol.TypeSubscribe, Stream: "e", Filter: &protocol.Filter{All: true}})
	if f := d.Expect(protocol.TypeError, 5*time.Second); f.Code != protocol.CodeForbidden {
		t.Fatalf("ephemeral without the subscribe scope: %+v", f)
	}
	r := streamtest.Dial(t, srv.URL, http.Header{"Authorization": {"Bearer r-secret"}})
	r.Subscribe(protocol.Command{Stream: "e", Filter: &protocol.Filter{All: true}})
	r.Send(&protocol.Command{Type: protocol.TypeSubscribe, Stream: "x", Durable: true, Filter: &protocol.Filter{All: true}})
	f := r.Next(5 * time.Second)
	for f.Type == protocol.TypeBatch && f.Stream == "e" { // e's first batch may come before the answer
		f = r.Next(5 * time.Second)
	}
	if f.Type != protocol.TypeError || f.Code != protocol.CodeForbidden && f.Code != protocol.CodeDurableUnavailable {
		t.Fatalf("durable without the streams scope: %+v", f)
	}
	events := httptest.NewServer(srv.EventsHandler())
	defer events.Close()
	resp, _ := roundTrip(t, newRequest(t, http.MethodGet, events.URL+"/events?all=true", http.Header{"Authorization": {"Bearer d-secret"}}))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("/events without the subscribe scope: %s", resp.Status)
	}

	// The admin scope: another owner's stream, on the fixture's server.
	admin := streamingtest.StartServer(t, sf.h, streamingtest.ServerOptions{Streams: sqliteStreams(t, t.TempDir()), Config: func(c *streaming.Config) {
		c.Tokens = []auth.Token{{Name: "a", Secret: "a-secret"}, {Name: "ops", Secret: "o-secret", Scopes: []auth.Scope{auth.ScopeAdmin}}}
	}})
	a := streamtest.Dial(t, admin.URL, http.Header{"Authorization": {"Bearer a-secret"}})
	a.Subscribe(protocol.Command{Stream: "mine", Durable: true, Filter: &protocol.Filter{All: true}})
	o := streamtest.Dial(t, admin.URL, http.Header{"Authorization": {"Bearer o-secret"}})
	o.Subscribe(protocol.Command{Stream: "mine", Durable: true})
}

// metricsNameTheOwner fails the test if a label of srv's metrics holds
// the stream's name, or marlowe_streaming_stream_lag has no owner label
// naming owner.
func metricsNameTheOwner(t *testing.T, srv *streamingtest.Server, owner, stream string) {
	t.Helper()
	mfs, err := srv.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ownerLabelled := false
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), stream) {
					t.Fatalf("%s has the stream's name: %v", mf.GetName(), m)
				}
				if mf.GetName() == "marlowe_streaming_stream_lag" && l.GetName() == "owner" && l.GetValue() == owner {
					ownerLabelled = true
				}
			}
		}
	}
	if !ownerLabelled {
		t.Fatalf("no marlowe_streaming_stream_lag{owner=%q}", owner)
	}
}
