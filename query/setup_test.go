package query_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/goleak"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/query"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a running pipeline with the API served over loopback and a
// client that checks every answer against the OpenAPI document.
type fixture struct {
	t      testing.TB
	p      *projectiontest.Pipeline
	srv    *query.Server
	base   string
	client *http.Client
	spec   *spec
}

// newFixture starts a pipeline on backend, grows its chain by blocks
// changes, and serves the API.
func newFixture(t testing.TB, backend string, seed int64, changes int, tune func(*query.Config)) *fixture {
	p := projectiontest.Start(t, projectiontest.Options{Backend: backend, Generator: projectiontest.DefaultGenerator(seed), Batch: true})
	return grow(t, p, changes, tune)
}

// grow advances a pipeline and serves its API.
func grow(t testing.TB, p *projectiontest.Pipeline, changes int, tune func(*query.Config)) *fixture {
	if changes > 0 {
		p.Advance(changes)
		p.Sync()
	}
	return serve(t, p, tune)
}

// newFixtureFor serves the API of a running pipeline.
func newFixtureFor(t testing.TB, p *projectiontest.Pipeline, tune func(*query.Config)) *fixture {
	return serve(t, p, tune)
}

func serve(t testing.TB, p *projectiontest.Pipeline, tune func(*query.Config)) *fixture {
	reg := prometheus.NewRegistry()
	cfg := query.Config{
		Addr: "127.0.0.1:0", Contracts: p.Projection, History: p.Handle, Projection: p.Projection,
		Status: func() query.Status {
			tip := p.Tip()
			return query.Status{Network: "devnet", NetworkMagic: 42, Version: "test", Connected: true,
				NodeTip: chain.Tip{Point: tip.Point(), BlockNo: tip.BlockNo}, Follower: tip, Committed: tip, SyncProgress: 1,
				HistorySeq: p.Handle.Head(), ProjectionError: p.Projection.LastError()}
		},
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), Registerer: reg,
	}
	if tune != nil {
		tune(&cfg)
	}
	f := serveConfig(t, cfg)
	f.p = p
	return f
}

// serveConfig serves the API as configured.
func serveConfig(t testing.TB, cfg query.Config) *fixture {
	srv, err := query.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, srv: srv, base: "http://" + srv.Addr(), client: &http.Client{Timeout: time.Minute,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, spec: loadSpec(t)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f.client.CloseIdleConnections()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return f
}

// at returns the fixture for a subtest: its failures are the subtest's.
func (f *fixture) at(t testing.TB) *fixture {
	g := *f
	g.t = t
	return &g
}

// answer is one response.
type answer struct {
	code   int
	header http.Header
	body   []byte
}

func (a *answer) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("%v: %s", err, a.body)
	}
}

// get asks for path (with its query) and checks the request and the answer
// against the OpenAPI document; want is the expected status (0: any).
func (f *fixture) get(path string, want int) *answer {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.base+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	a := f.send(req, want)
	if a.header.Get(query.HeaderSeq) == "" || a.header.Get(query.HeaderNodeTip) == "" {
		f.t.Fatalf("GET %s: no position headers", path)
	}
	if a.code < 500 || a.code == http.StatusServiceUnavailable {
		f.spec.check(f.t, req, a)
	}
	return a
}

// send makes the request and reads the whole answer; want is the expected
// status (0: any).
func (f *fixture) send(req *http.Request, want int) *answer {
	f.t.Helper()
	res, err := f.client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		f.t.Fatal(err)
	}
	a := &answer{code: res.StatusCode, header: res.Header, body: body}
	if want != 0 && a.code != want {
		f.t.Fatalf("%s %s: %d, want %d: %s", req.Method, req.URL.RequestURI(), a.code, want, clip(body))
	}
	return a
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// base64URL encodes a cursor's text as the API does.
func base64URL(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// pathEscape escapes an id for a path: # is %23.
func pathEscape(id string) string { return strings.ReplaceAll(id, "#", "%23") }

// must fails on a non-nil error.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
