package explorer_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/query/explorer"
)

func newHandler(t *testing.T) *explorer.Handler {
	t.Helper()
	h, err := explorer.New(explorer.Options{Network: "preprod"})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(t *testing.T, h http.Handler, method, target string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestFiles: every page and file with its content type, the caching and
// security headers, 304 on a matching ETag, gzip for clients that take it,
// and HEAD without a body.
func TestFiles(t *testing.T) {
	h := newHandler(t)
	want := map[string]string{
		".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
		".svg": "image/svg+xml", ".json": "application/json",
	}
	paths := h.Paths()
	if len(paths) < 10 || paths[0] != "/" {
		t.Fatalf("paths %v", paths)
	}
	for _, p := range paths {
		rec := get(t, h, http.MethodGet, p, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", p, rec.Code)
		}
		page := explorer.Pages[p] != ""
		ext := path.Ext(p)
		if page {
			ext = ".html"
		}
		hd := rec.Header()
		if ct := hd.Get("Content-Type"); ct != want[ext] {
			t.Errorf("GET %s: Content-Type %q, want %q", p, ct, want[ext])
		}
		if hd.Get("Cache-Control") != explorer.CacheControl || hd.Get("X-Content-Type-Options") != "nosniff" || hd.Get("ETag") == "" {
			t.Errorf("GET %s: headers %v", p, hd)
		}
		if csp := hd.Get("Content-Security-Policy"); (page || strings.HasSuffix(p, "-worker.js")) != (csp == explorer.ContentSecurityPolicy) {
			t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
		}
		body := rec.Body.Bytes()
		if len(body) == 0 {
			t.Errorf("GET %s: empty", p)
		}
		if c := get(t, h, http.MethodGet, p, map[string]string{"If-None-Match": hd.Get("ETag")}); c.Code != http.StatusNotModified || c.Body.Len() != 0 {
			t.Errorf("GET %s with its ETag: %d, %d bytes", p, c.Code, c.Body.Len())
		}
		if c := get(t, h, http.MethodHead, p, nil); c.Code != http.StatusOK || c.Body.Len() != 0 || c.Header().Get("Content-Length") != strconv.Itoa(len(body)) {
			t.Errorf("HEAD %s: %d, %d bytes, length %q", p, c.Code, c.Body.Len(), c.Header().Get("Content-Length"))
		}
		gz := get(t, h, http.MethodGet, p, map[string]string{"Accept-Encoding": "br, gzip;q=0.8"})
		if gz.Header().Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(gz.Body)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(plain, body) || gz.Header().Get("ETag") == hd.Get("ETag") {
				t.Errorf("GET %s gzip: %v, same body %v, ETag %q", p, err, bytes.Equal(plain, body), gz.Header().Get("ETag"))
			}
			if !strings.Contains(gz.Header().Get("Vary"), "Accept-Encoding") {
				t.Errorf("GET %s gzip: Vary %q", p, gz.Header().Get("Vary"))
			}
		} else if len(body) > 4096 {
			t.Errorf("GET %s: %d bytes not compressed", p, len(body))
		}
		if no := get(t, h, http.MethodGet, p, map[string]string{"Accept-Encoding": "gzip;q=0"}); no.Header().Get("Content-Encoding") != "" {
			t.Errorf("GET %s: gzip;q=0 was compressed", p)
		}
	}
}

// TestUnknownPaths: paths that are no page or file get the API's JSON 404
// (the HTML files only at their pages' paths, no directory listings).
func TestUnknownPaths(t *testing.T) {
	h := newHandler(t)
	for _, p := range []string{"/ui/", "/ui/nope", "/ui/js/", "/ui/index.html", "/ui/contract.html", "/ui/js/nope.js", "/ui/contract/x"} {
		rec := get(t, h, http.MethodGet, p, nil)
		var body struct{ Code, Message string }
		if rec.Code != http.StatusNotFound || rec.Header().Get("Content-Type") != "application/json" ||
			json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Code != "not_found" {
			t.Errorf("GET %s: %d %q %s", p, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	}
}

var (
	refPattern    = regexp.MustCompile(`(?:src|href)="([^"]*)"`)
	importPattern = regexp.MustCompile(`(?m)^\s*import\s[^;]*?from\s+"([^"]+)"|^\s*import\s+"([^"]+)"`)
	externalURL   = regexp.MustCompile(`(?i)\b(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
)

// TestLinksStayOnThePort: every src and href of the pages (the
// modulepreload links New adds too), and every import of the modules, is a
// relative link to a file of the explorer or a path of the API; nothing
// points at another host (the pages work without any external network).
func TestLinksStayOnThePort(t *testing.T) {
	h := newHandler(t)
	served := map[string]bool{}
	for _, p := range h.Paths() {
		served[p] = true
	}
	api := map[string]bool{"/openapi.json": true}
	for _, p := range h.Paths() {
		body := get(t, h, http.MethodGet, p, nil).Body.String()
		var refs []string
		switch {
		case explorer.Pages[p] != "":
			for _, m := range refPattern.FindAllStringSubmatch(body, -1) {
				refs = append(refs, m[1])
			}
		case strings.HasSuffix(p, ".js"):
			for _, m := range importPattern.FindAllStringSubmatch(body, -1) {
				refs = append(refs, m[1]+m[2])
			}
		}
		for _, ref := range refs {
			if strings.HasPrefix(ref, "#") {
				continue
			}
			u, err := url.Parse(ref)
			if err != nil || u.Host != "" || u.Scheme != "" {
				t.Errorf("%s: %q leaves the port", p, ref)
				continue
			}
			if strings.HasPrefix(u.Path, "/") {
				t.Errorf("%s: %q is not relative (a proxy may mount the port under a path)", p, ref)
				continue
			}
			base := p
			if strings.HasSuffix(p, "/") {
				base += "x"
			}
			target := path.Join(path.Dir(base), u.Path)
			if strings.HasSuffix(u.Path, "/") && target != "/" {
				target += "/"
			}
			if !served[target] && !api[target] {
				t.Errorf("%s: %q resolves to %s, which is neither a file nor an API path", p, ref, target)
			}
		}
		if p == explorer.ConfigPath {
			continue // the Cardano explorer links, followed only when a user clicks one (TestConfig)
		}
		for _, m := range externalURL.FindAllString(body, -1) {
			if m != "http://www.w3.org" && m != "//www.w3.org" {
				t.Errorf("%s refers to another host: %s", p, m)
			}
		}
	}
}

// TestModulePreload: each page preloads every module its script imports,
// directly or not, and nothing else.
func TestModulePreload(t *testing.T) {
	h := newHandler(t)
	body := get(t, h, http.MethodGet, "/ui/contract", nil).Body.String()
	links := regexp.MustCompile(`<link rel="modulepreload" href="([^"]+)">`).FindAllStringSubmatch(body, -1)
	got := map[string]bool{}
	for _, l := range links {
		got[l[1]] = true
	}
	for _, want := range []string{"js/api.js", "js/json.js", "js/ui.js", "js/hub.js", "js/stream.js", "js/rowinfo.js", "js/tree.js", "js/notation.js", "js/words.js", "js/format.js"} {
		if !got[want] {
			t.Errorf("/ui/contract does not preload %s: %v", want, links)
		}
	}
	if got["js/contract-page.js"] || got["js/events-worker.js"] || got["js/api-page.js"] {
		t.Errorf("/ui/contract preloads more than its imports: %v", links)
	}
	if root := get(t, h, http.MethodGet, "/", nil).Body.String(); !strings.Contains(root, `<link rel="modulepreload" href="ui/js/hub.js">`) {
		t.Errorf("/ does not preload ui/js/hub.js")
	}
}

// TestSlotConfigsMatch keeps the pages' slot clocks (format.js, SLOTS) the
// server's.
func TestSlotConfigsMatch(t *testing.T) {
	src, err := os.ReadFile("static/js/format.js")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]chain.SlotConfig{
		"mainnet": chain.MainnetSlots, "preprod": chain.PreprodSlots, "preview": chain.PreviewSlots,
		"devnet": {ZeroSlot: 0, ZeroTimeMillis: devnet.ZeroTimeMillis, SlotLengthMillis: devnet.SlotLengthMillis},
	}
	re := regexp.MustCompile(`(\w+): \{ zeroSlot: (\d+), zeroTime: (-?\d+), slotLength: (\d+) \}`)
	found := 0
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		w, ok := want[m[1]]
		if !ok {
			continue
		}
		found++
		got := m[2] + " " + m[3] + " " + m[4]
		if exp := strconv.FormatUint(w.ZeroSlot, 10) + " " + strconv.FormatInt(w.ZeroTimeMillis, 10) + " " + strconv.FormatInt(w.SlotLengthMillis, 10); got != exp {
			t.Errorf("format.js %s: %s, the server's %s", m[1], got, exp)
		}
	}
	if found != len(want) {
		t.Errorf("format.js has %d of the %d networks", found, len(want))
	}
}

// TestEmbeddedMatchesTheTree: the binary serves exactly the files of
// static/ (no stale or missing file) and a page for each of pages/ but the
// layout.
func TestEmbeddedMatchesTheTree(t *testing.T) {
	h := newHandler(t)
	n := 0
	err := fs.WalkDir(os.DirFS("static"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		disk, _ := os.ReadFile("static/" + p)
		if got := get(t, h, http.MethodGet, explorer.Prefix+p, nil).Body.Bytes(); !bytes.Equal(got, disk) {
			t.Errorf("%s differs from the embedded file", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(os.DirFS("pages"), "*.html")
	if err != nil {
		t.Fatal(err)
	}
	if len(names)-1 != len(explorer.Pages) { // - layout.html
		t.Errorf("%d pages in pages/ (and the layout), %d served", len(names)-1, len(explorer.Pages))
	}
	for _, name := range names {
		if name != "layout.html" && !slices.Contains(slices.Collect(maps.Values(explorer.Pages)), name) {
			t.Errorf("pages/%s is served at no path", name)
		}
	}
	if n+1+len(explorer.Pages) != len(h.Paths()) { // + config.json, written by New
		t.Errorf("%d files on disk (and config.json and %d pages), %d served", n, len(explorer.Pages), len(h.Paths()))
	}
}

// TestPagesInTheLayout: every page has the layout's head and frame, its
// own title and script, and links relative to where it is served.
func TestPagesInTheLayout(t *testing.T) {
	h := newHandler(t)
	for p, name := range explorer.Pages {
		body := get(t, h, http.MethodGet, p, nil).Body.String()
		base := "" // (pages under /ui/)
		if p == "/" {
			base = "ui/"
		}
		script := strings.TrimSuffix(name, ".html") + "-page.js"
		if p == "/" {
			script = "contracts-page.js"
		}
		for _, want := range []string{
			"<!doctype html>\n<html lang=\"en\">\n<head>\n",
			" · marlowe-follower</title>\n",
			`<link rel="icon" href="` + base + `icon.svg" type="image/svg+xml">`,
			`<link rel="stylesheet" href="` + base + `style.css">`,
			`<script type="module" src="` + base + "js/" + script + `"></script>`,
			"<header class=\"top\" id=\"top\"></header>\n",
			"<main id=\"main\">\n  <",
			"\n</main>\n<footer>",
			"</footer>\n</body>\n</html>\n",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s (%s): no %q", p, name, want)
			}
		}
		if strings.Contains(body, "{{") || strings.Count(body, "<title>") != 1 || strings.Contains(body, "<title> · ") {
			t.Errorf("%s (%s): the layout was not filled in: %s", p, name, body[:min(len(body), 400)])
		}
	}
}
