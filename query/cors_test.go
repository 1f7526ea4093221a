package query_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/query"
)

// do sends a request with the given headers and reads the whole answer.
func (f *fixture) do(method, path string, hdr map[string]string) *answer {
	f.t.Helper()
	req, err := http.NewRequest(method, f.base+path, nil)
	must(f.t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return f.send(req, 0)
}

// headerList splits a comma-separated header (all its lines) into names.
func headerList(h http.Header, name string) []string {
	var out []string
	for _, line := range h.Values(name) {
		for _, v := range strings.Split(line, ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, http.CanonicalHeaderKey(v))
			}
		}
	}
	return out
}

func noCORSHeaders(t *testing.T, what string, a *answer) {
	t.Helper()
	for k := range a.header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("%s: unexpected %s: %s", what, k, a.header.Get(k))
		}
	}
}

func errorCode(t *testing.T, a *answer) string {
	t.Helper()
	var e struct{ Code, Message string }
	if err := json.Unmarshal(a.body, &e); err != nil || e.Message == "" {
		t.Fatalf("not an API error: %v %s", err, a.body)
	}
	return e.Code
}

// streamsStub stands for streaming's handlers mounted on the query port.
var streamsStub = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

func withStreams(c *query.Config) {
	c.Handlers = map[string]http.Handler{"GET /events": streamsStub, "GET /streams": streamsStub,
		"GET /streams/{name}": streamsStub, "DELETE /streams/{name}": streamsStub}
}

// TestCORS: preflights and actual requests from allowed and refused
// origins, with a list of origins, with *, and with none (the default).
func TestCORS(t *testing.T) {
	const dapp, evil = "https://dapp.example", "https://evil.example"
	p := projectiontest.Start(t, projectiontest.Options{Backend: projectiontest.SQLite, Generator: projectiontest.DefaultGenerator(3), Batch: true})
	p.Advance(30)
	p.Sync()
	f := newFixtureFor(t, p, func(c *query.Config) {
		withStreams(c)
		withRuntime(c)
		c.CORS.Origins = []string{dapp, "http://localhost:5173"}
	})
	preflight := func(f *fixture, path, from, method, headers string) *answer {
		h := map[string]string{"Origin": from, "Access-Control-Request-Method": method}
		if headers != "" {
			h["Access-Control-Request-Headers"] = headers
		}
		return f.do(http.MethodOptions, path, h)
	}

	t.Run("preflight from an allowed origin", func(t *testing.T) {
		a := preflight(f, "/contracts?limit=5", dapp, "GET", "range,authorization,content-type,accept,last-event-id")
		if a.code != http.StatusNoContent || len(a.body) != 0 {
			t.Fatalf("%d %s", a.code, a.body)
		}
		if got := a.header.Get("Access-Control-Allow-Origin"); got != dapp {
			t.Errorf("Allow-Origin %q", got)
		}
		if got := a.header.Get("Access-Control-Allow-Methods"); got != "GET, HEAD, OPTIONS" {
			t.Errorf("Allow-Methods %q", got)
		}
		allowed := headerList(a.header, "Access-Control-Allow-Headers")
		for _, want := range []string{"Range", "Authorization", "Content-Type", "Accept", "Last-Event-Id", "X-Change-Address", "X-Address", "X-Collateral-Utxo"} {
			if !slices.Contains(allowed, want) {
				t.Errorf("Allow-Headers lacks %s: %v", want, allowed)
			}
		}
		if got := a.header.Get("Access-Control-Max-Age"); got != "600" {
			t.Errorf("Max-Age %q", got)
		}
		if !slices.Contains(headerList(a.header, "Vary"), "Origin") {
			t.Errorf("Vary %v", a.header.Values("Vary"))
		}
		if a.header.Get("Access-Control-Allow-Credentials") != "" || a.header.Get("Access-Control-Allow-Private-Network") != "" {
			t.Errorf("credentials or private network allowed: %v", a.header)
		}
		// A normalised spelling of the same origin is the same origin.
		if a := preflight(f, "/status", "http://localhost:5173", "GET", ""); a.code != http.StatusNoContent ||
			a.header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
			t.Errorf("second origin: %d %v", a.code, a.header)
		}
	})

	t.Run("preflight methods follow the routes", func(t *testing.T) {
		if got := preflight(f, "/streams/mine", dapp, "DELETE", "authorization").header.Get("Access-Control-Allow-Methods"); got != "GET, HEAD, DELETE, OPTIONS" {
			t.Errorf("/streams/{name}: %q", got)
		}
		if got := preflight(f, "/streams", dapp, "GET", "").header.Get("Access-Control-Allow-Methods"); got != "GET, HEAD, OPTIONS" {
			t.Errorf("/streams: %q", got)
		}
		if got := preflight(f, "/events?all=true", dapp, "GET", "last-event-id").header.Get("Access-Control-Allow-Methods"); got != "GET, HEAD, OPTIONS" {
			t.Errorf("/events: %q", got)
		}
		// The Runtime view answers GET and HEAD only (its catch-all answers
		// the other methods 405), as docs/query.md says.
		for _, path := range []string{"/runtime/contracts", "/runtime/contracts/sources/" + strings.Repeat("0", 64), "/runtime/nothing"} {
			if got := preflight(f, path, dapp, "POST", "content-type").header.Get("Access-Control-Allow-Methods"); got != "GET, HEAD, OPTIONS" {
				t.Errorf("%s: %q", path, got)
			}
		}
		// POST is not a method of the API: the browser reads the list and stops.
		if a := preflight(f, "/contracts", dapp, "POST", "content-type"); a.code != http.StatusNoContent ||
			strings.Contains(a.header.Get("Access-Control-Allow-Methods"), "POST") {
			t.Errorf("POST preflight: %d %q", a.code, a.header.Get("Access-Control-Allow-Methods"))
		}
	})

	t.Run("preflight on an unknown path", func(t *testing.T) {
		a := preflight(f, "/no/such/route", dapp, "GET", "range")
		if a.code != http.StatusNoContent || a.header.Get("Access-Control-Allow-Origin") != dapp ||
			a.header.Get("Access-Control-Allow-Methods") != "GET, HEAD, OPTIONS" {
			t.Fatalf("%d %v %s", a.code, a.header, a.body)
		}
		// The GET that follows gets a 404 the page can read.
		g := f.do(http.MethodGet, "/no/such/route", map[string]string{"Origin": dapp})
		if g.code != http.StatusNotFound || g.header.Get("Access-Control-Allow-Origin") != dapp || errorCode(t, g) != "not_found" {
			t.Fatalf("GET: %d %v %s", g.code, g.header, g.body)
		}
	})

	t.Run("preflight from a refused origin", func(t *testing.T) {
		for _, o := range []string{evil, "http://dapp.example", "https://dapp.example:8443", "null", "not an origin"} {
			a := preflight(f, "/contracts", o, "GET", "range")
			if a.code != http.StatusForbidden || errorCode(t, a) != "origin_not_allowed" {
				t.Errorf("%s: %d %s", o, a.code, a.body)
			}
			if !strings.Contains(string(a.body), "cors.origins") || a.header.Get("Content-Type") != "application/json" {
				t.Errorf("%s: the error does not say what to change: %s", o, a.body)
			}
			if a.header.Get("Access-Control-Allow-Origin") != "" || a.header.Get("Access-Control-Allow-Methods") != "" {
				t.Errorf("%s: CORS headers on a refusal: %v", o, a.header)
			}
		}
	})

	t.Run("simple request from an allowed origin", func(t *testing.T) {
		a := f.do(http.MethodGet, "/contracts?limit=2", map[string]string{"Origin": dapp})
		if a.code != http.StatusOK || a.header.Get("Access-Control-Allow-Origin") != dapp {
			t.Fatalf("%d %v", a.code, a.header)
		}
		exposed := headerList(a.header, "Access-Control-Expose-Headers")
		for _, want := range []string{"Content-Range", "Next-Range", "Accept-Ranges", "Total-Count", "X-Node-Tip", "X-Node-Tip-Block-No",
			"X-Runtime-Chain-Tip", "X-Runtime-Tip", "X-Network-Id", "X-Runtime-Version", "Retry-After",
			"X-Marlowe-Seq", "X-Marlowe-Block-Slot", "X-Marlowe-Block-No", "X-Marlowe-Block-Hash"} {
			if !slices.Contains(exposed, want) {
				t.Errorf("Expose-Headers lacks %s: %v", want, exposed)
			}
		}
		if !slices.Contains(headerList(a.header, "Vary"), "Origin") {
			t.Errorf("Vary %v", a.header.Values("Vary"))
		}
		for _, path := range []string{"/status", "/events", "/streams/x"} {
			if a := f.do(http.MethodGet, path, map[string]string{"Origin": dapp}); a.header.Get("Access-Control-Allow-Origin") != dapp {
				t.Errorf("%s: %d %v", path, a.code, a.header)
			}
		}
	})

	t.Run("simple request from a refused origin", func(t *testing.T) {
		a := f.do(http.MethodGet, "/contracts?limit=2", map[string]string{"Origin": evil})
		if a.code != http.StatusOK {
			t.Fatalf("%d", a.code)
		}
		noCORSHeaders(t, "refused origin", a)
		plain := f.do(http.MethodGet, "/contracts?limit=2", nil)
		noCORSHeaders(t, "no Origin", plain)
		for what, a := range map[string]*answer{"refused origin": a, "no Origin": plain} {
			if !slices.Contains(headerList(a.header, "Vary"), "Origin") {
				t.Errorf("%s: Vary %v: a cache could hand this answer to an allowed page", what, a.header.Values("Vary"))
			}
		}
	})

	t.Run("other methods still answer 405", func(t *testing.T) {
		for _, h := range []map[string]string{nil, {"Origin": dapp}} {
			for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
				a := f.do(m, "/contracts", h)
				if a.code != http.StatusMethodNotAllowed || errorCode(t, a) != "method_not_allowed" || a.header.Get("Allow") != "GET, HEAD" {
					t.Errorf("%s with %v: %d %v %s", m, h, a.code, a.header, a.body)
				}
			}
		}
		// An OPTIONS that is not a preflight is not answered as one.
		if a := f.do(http.MethodOptions, "/contracts", map[string]string{"Origin": dapp}); a.code != http.StatusMethodNotAllowed ||
			a.header.Get("Access-Control-Allow-Methods") != "" {
			t.Errorf("plain OPTIONS: %d %v", a.code, a.header)
		}
		if a := f.do(http.MethodPost, "/contracts", map[string]string{"Origin": dapp}); a.header.Get("Access-Control-Allow-Origin") != dapp {
			t.Errorf("the 405 is not readable by the page: %v", a.header)
		}
	})

	t.Run("private network preflight", func(t *testing.T) {
		a := f.do(http.MethodOptions, "/contracts", map[string]string{"Origin": dapp, "Access-Control-Request-Method": "GET",
			"Access-Control-Request-Private-Network": "true"})
		if a.code != http.StatusNoContent || a.header.Get("Access-Control-Allow-Private-Network") != "true" {
			t.Fatalf("%d %v", a.code, a.header)
		}
	})

	t.Run("any origin", func(t *testing.T) {
		any := newFixtureFor(t, p, func(c *query.Config) { c.CORS.Origins = []string{"*"} })
		for _, o := range []string{evil, dapp, "null", "http://localhost:1234"} {
			a := preflight(any, "/contracts", o, "GET", "range")
			if a.code != http.StatusNoContent || a.header.Get("Access-Control-Allow-Origin") != "*" ||
				a.header.Get("Access-Control-Allow-Methods") != "GET, HEAD, OPTIONS" {
				t.Errorf("preflight from %s: %d %v", o, a.code, a.header)
			}
			g := any.do(http.MethodGet, "/status", map[string]string{"Origin": o})
			if g.code != http.StatusOK || g.header.Get("Access-Control-Allow-Origin") != "*" ||
				!slices.Contains(headerList(g.header, "Access-Control-Expose-Headers"), "X-Node-Tip") {
				t.Errorf("GET from %s: %d %v", o, g.code, g.header)
			}
		}
	})

	t.Run("default: same origin only", func(t *testing.T) {
		def := newFixtureFor(t, p, nil)
		a := preflight(def, "/contracts", dapp, "GET", "range")
		if a.code != http.StatusForbidden || errorCode(t, a) != "origin_not_allowed" || !strings.Contains(string(a.body), "not enabled") {
			t.Fatalf("%d %s", a.code, a.body)
		}
		noCORSHeaders(t, "default preflight", a)
		g := def.do(http.MethodGet, "/contracts?limit=1", map[string]string{"Origin": dapp})
		if g.code != http.StatusOK || g.header.Get("Vary") != "" {
			t.Fatalf("%d %v", g.code, g.header)
		}
		noCORSHeaders(t, "default GET", g)
		if a := def.do(http.MethodOptions, "/contracts", nil); a.code != http.StatusMethodNotAllowed {
			t.Errorf("OPTIONS without Origin: %d", a.code)
		}
	})
}

// TestCORSOriginsAreValidated: New refuses an origin that is not
// scheme://host[:port] and names it.
func TestCORSOriginsAreValidated(t *testing.T) {
	p := projectiontest.Start(t, projectiontest.Options{Backend: projectiontest.SQLite, Generator: projectiontest.DefaultGenerator(4)})
	for _, bad := range []string{"dapp.example", "https://dapp.example/", "https://*.example", "http://localhost:99999"} {
		_, err := query.New(query.Config{Contracts: p.Projection, History: p.Handle, Projection: p.Projection,
			CORS: query.CORS{Origins: []string{"https://ok.example", bad}}})
		if err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) || !strings.Contains(err.Error(), "scheme://host[:port]") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestCORSExposesEveryHeader: every response header that this package and
// the streaming handlers it mounts set (found in their source) is exposed
// to pages, but for those a page has no use for.
func TestCORSExposesEveryHeader(t *testing.T) {
	notForPages := map[string]bool{"X-Content-Type-Options": true, "X-Accel-Buffering": true}
	literal := regexp.MustCompile(`"((?:X-[A-Za-z0-9-]+)|Retry-After|WWW-Authenticate|Content-Range|Next-Range|Prev-Range|Total-Count|Accept-Ranges|Allow)"`)
	var files []string
	for _, pattern := range []string{"*.go", "runtime/*.go", "internal/api/*.go", "../streaming/*.go"} {
		m, err := filepath.Glob(pattern)
		must(t, err)
		files = append(files, m...)
	}
	found := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || file == "cors.go" { // cors.go names request headers too
			continue
		}
		src, err := os.ReadFile(file)
		must(t, err)
		for _, m := range literal.FindAllStringSubmatch(string(src), -1) {
			name := http.CanonicalHeaderKey(m[1])
			found++
			if notForPages[name] {
				continue
			}
			if !slices.ContainsFunc(query.CORSExposedHeaders, func(h string) bool { return http.CanonicalHeaderKey(h) == name }) {
				t.Errorf("%s sets %s, which query.CORSExposedHeaders does not expose", file, name)
			}
		}
	}
	if found < 8 {
		t.Fatalf("found only %d header names: the scan is broken", found)
	}
}
