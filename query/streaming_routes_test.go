package query_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/query"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

func init() {
	// The event stream's body is text; the document gives it as a string.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
}

// TestStreamingRoutesAgainstSpec mounts the streaming package's handlers
// on the query port, as the service does, and checks GET /events, GET
// /streams, GET and DELETE /streams/{name} against the OpenAPI document:
// every operation of a path the document marks x-served-by: streaming
// answers its success status, and the refusals (unknown parameters, a
// missing token) are JSON errors the document describes.
func TestStreamingRoutesAgainstSpec(t *testing.T) {
	ctx := context.Background()
	p := projectiontest.Start(t, projectiontest.Options{Backend: projectiontest.SQLite, Generator: projectiontest.DefaultGenerator(5), Batch: true})
	p.Advance(120)
	p.Sync()
	streams, err := sqlstreams.OpenSQLite(ctx, t.TempDir())
	must(t, err)
	t.Cleanup(func() { streams.Close() })
	cfg := streamingtest.TestConfig()
	cfg.Token = "tok"
	ws, err := streaming.New(cfg, streaming.Deps{History: p.Handle, System: p.System, Streams: streams,
		Tip: func() chain.Tip { h := p.Tip(); return chain.Tip{Point: h.Point(), BlockNo: h.BlockNo} }})
	must(t, err)
	must(t, ws.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = ws.Shutdown(sctx)
	})
	h := ws.StreamsHandler()
	f := newFixtureFor(t, p, func(c *query.Config) {
		c.Handlers = map[string]http.Handler{"GET /events": ws.EventsHandler(), "GET /streams": h, "GET /streams/{name}": h, "DELETE /streams/{name}": h}
	})
	// A durable stream to list, read and delete.
	raw := streamtest.Dial(t, "ws://"+ws.Addr().String()+"/", http.Header{"Authorization": {"Bearer tok"}})
	raw.Subscribe(protocol.Command{Stream: "app", Durable: true, Filter: &protocol.Filter{Kinds: []string{"contract_created"}}})
	raw.Ack(raw.Expect(protocol.TypeBatch, 5*time.Second))

	auth := http.Header{"Authorization": {"Bearer tok"}}
	f.streamingCall(http.MethodGet, "/events?kind=contract_created&from=origin", auth, http.StatusOK)
	f.streamingCall(http.MethodGet, "/events?contract="+pathEscape(created(p))+"&access_token=tok", nil, http.StatusOK)
	f.streamingCall(http.MethodGet, "/events?all=true", nil, http.StatusUnauthorized)
	f.streamingCall(http.MethodGet, "/events?all=true&roleCurrencies=x", auth, http.StatusBadRequest)
	f.streamingCall(http.MethodGet, "/events?contract=x&contractId=y", auth, http.StatusBadRequest)
	f.streamingCall(http.MethodGet, "/streams?limit=10", auth, http.StatusOK)
	f.streamingCall(http.MethodGet, "/streams?offset=1", auth, http.StatusBadRequest)
	f.streamingCall(http.MethodGet, "/streams", nil, http.StatusUnauthorized)
	f.streamingCall(http.MethodGet, "/streams/app", auth, http.StatusOK)
	f.streamingCall(http.MethodGet, "/streams/nope", auth, http.StatusNotFound)
	f.streamingCall(http.MethodDelete, "/streams/app?access_token=tok", nil, http.StatusNoContent)
	f.streamingCall(http.MethodDelete, "/streams/app", auth, http.StatusNotFound)

	for path, item := range f.spec.doc.Paths.Map() {
		if item.Extensions["x-served-by"] == nil {
			continue
		}
		for method := range item.Operations() {
			want := "200"
			if method == http.MethodDelete {
				want = "204"
			}
			if !f.spec.hit[method+" "+path+" "+want] {
				t.Errorf("%s %s was never answered %s", method, path, want)
			}
		}
	}
}

// streamingCall makes a request to a mounted streaming handler (no
// position headers) and checks the request and the answer against the
// document; an event stream is read for its first events only.
func (f *fixture) streamingCall(method, path string, header http.Header, want int) {
	t := f.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, f.base+path, nil)
	must(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := f.client.Do(req)
	must(t, err)
	var body []byte
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		var sb strings.Builder
		sc := bufio.NewScanner(res.Body)
		for events := 0; events < 3 && sc.Scan(); {
			sb.WriteString(sc.Text() + "\n")
			if sc.Text() == "" {
				events++
			}
		}
		body = []byte(sb.String())
		if !strings.Contains(sb.String(), "event: record") {
			t.Fatalf("%s %s: no record events: %q", method, path, body)
		}
	} else {
		body, err = io.ReadAll(res.Body)
		must(t, err)
	}
	res.Body.Close()
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, res.StatusCode, want, clip(body))
	}
	a := &answer{code: res.StatusCode, header: res.Header, body: body}
	route, params, err := f.spec.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s: not in the OpenAPI document: %v", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if a.code < 400 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Fatalf("%s %s: the request does not match the OpenAPI document: %v", method, path, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: a.code, Header: a.header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(a.body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Fatalf("%s %s: the %d answer does not match the OpenAPI document: %v\n%s", method, path, a.code, err, clip(a.body))
	}
	f.spec.mu.Lock()
	f.spec.hit[route.Method+" "+route.Path+" "+strconv.Itoa(a.code)] = true
	f.spec.mu.Unlock()
}

// created returns the id of a contract the chain created and kept.
func created(p *projectiontest.Pipeline) string {
	for _, a := range p.Activity() {
		if a.Kind == devnet.ActivityCreate && a.Contract != nil {
			return a.Contract.String()
		}
	}
	return ""
}
