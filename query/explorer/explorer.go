// Package explorer is the contract explorer: web pages on the query port
// that show the contracts (a live list with the query API's filters), one
// contract (its tree with the current position, state, assets, a timeline
// of its steps with rollbacks, payouts, what can be done next) and the
// service's sync status, updated live over GET /events.
//
// The pages are files embedded in the binary: HTML (pages/: one layout,
// the head and frame every page shares, and each page's title, script,
// content and footer, put together with html/template once, at start-up),
// CSS and vanilla JavaScript modules (static/), no build step and nothing
// fetched from elsewhere. They read only the public API, like any other client. Every
// file is served with its content type, a strong ETag (answered 304 when
// it matches) and Cache-Control: no-cache, so a browser revalidates and a
// new binary's files are never mixed with an old one's; HTML pages carry a
// Content-Security-Policy that allows only the port's own scripts, styles
// and connections. Files are gzip-compressed once, at start-up, for
// clients that accept it.
package explorer

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

//go:embed pages
var pages embed.FS

// Prefix is the path under which the explorer's files (and its pages other
// than the contracts list at /) are served.
const Prefix = "/ui/"

// Pages are the explorer's pages: request path to file (under pages/, each
// put in pages/layout.html). The contracts page is the port's root.
var Pages = map[string]string{
	"/":               "index.html",
	"/ui/contract":    "contract.html",
	"/ui/transaction": "transaction.html",
	"/ui/payouts":     "payouts.html",
	"/ui/api":         "api.html",
	"/ui/status":      "status.html",
}

// ContentSecurityPolicy is the policy of every page: scripts, styles,
// images and connections (fetch, EventSource) of the port itself only; no
// inline script, no plugins, no framing.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// CacheControl is sent with every file: revalidate each time (cheap: the
// ETag answers 304), since the file names carry no version.
const CacheControl = "no-cache"

// contentTypes by file extension.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".json": "application/json",
	".txt":  "text/plain; charset=utf-8",
}

// file is one embedded file, ready to serve.
type file struct {
	name  string
	body  []byte
	gz    []byte // nil when compression does not pay
	ctype string
	etag  string
	page  bool
}

// Handler serves the explorer's pages and files.
type Handler struct {
	files map[string]*file // by request path
}

// Options configure the explorer.
type Options struct {
	// Network is the network's name as /status gives it (mainnet,
	// preprod, preview, devnet, or the magic).
	Network string
	// Links is the query.uiLinks setting (ParseLinks): which Cardano
	// explorer the pages link transactions, addresses and policies to.
	Links string
	// APIDocs are the OpenAPI documents the API page shows, first the
	// default; empty: the native API's alone (DefaultAPIDocs).
	APIDocs []APIDoc
}

// APIDoc is an OpenAPI document the port serves: its path (relative to
// the port's root, "openapi.json") and its title on the API page.
type APIDoc struct {
	Path  string `json:"path"`
	Title string `json:"title"`
}

// DefaultAPIDocs is the native API's document.
var DefaultAPIDocs = []APIDoc{{Path: "openapi.json", Title: "Native API"}}

// ConfigPath is the explorer's configuration as the pages read it:
// {"network", "links": {"tx", "address", "policy"}, "apiDocs": [{"path",
// "title"}]} (link templates with {id}; a kind without a template gets no
// link).
const ConfigPath = Prefix + "config.json"

// New loads the embedded files and writes the pages' configuration.
func New(opts Options) (*Handler, error) {
	links, err := ParseLinks(opts.Links, opts.Network)
	if err != nil {
		return nil, fmt.Errorf("query.uiLinks: %w", err)
	}
	docs := opts.APIDocs
	if len(docs) == 0 {
		docs = DefaultAPIDocs
	}
	cfg, err := json.Marshal(map[string]any{"network": opts.Network, "links": links, "apiDocs": docs})
	if err != nil {
		return nil, err
	}
	h := &Handler{files: map[string]*file{}}
	load := func(name string, page bool) (*file, error) {
		body, err := fs.ReadFile(static, "static/"+name)
		if err != nil {
			return nil, err
		}
		return newFile(name, body, page), nil
	}
	layout, err := template.ParseFS(pages, "pages/layout.html")
	if err != nil {
		return nil, err
	}
	for p, name := range Pages {
		body, err := render(layout, name, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		body, err = preload(body, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		h.files[p] = newFile(name, body, true)
	}
	err = fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		if path.Ext(name) == ".html" {
			return nil // pages are served at their own paths only
		}
		f, err := load(name, false)
		if err != nil {
			return err
		}
		h.files[Prefix+name] = f
		return nil
	})
	if err != nil {
		return nil, err
	}
	h.files[ConfigPath] = newFile("config.json", append(cfg, '\n'), false)
	return h, nil
}

// render puts the page pages/name in the layout. pagePath is where the
// page is served: the layout's links to the style sheet, the icon and the
// script are relative to it.
func render(layout *template.Template, name, pagePath string) ([]byte, error) {
	t, err := layout.Clone()
	if err != nil {
		return nil, err
	}
	src, err := fs.ReadFile(pages, "pages/"+name)
	if err != nil {
		return nil, err
	}
	if _, err := t.New(name).Parse(string(src)); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	base := strings.TrimPrefix(Prefix, pageDir(pagePath)) // "ui/" from the root, "" from under /ui/
	if err := t.ExecuteTemplate(&b, "layout.html", struct{ Base string }{base}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// pageDir is the directory of the page served at pagePath, with a
// trailing slash: "/" or "/ui/".
func pageDir(pagePath string) string {
	dir := path.Dir(pagePath + "x")
	if !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	return dir
}

var (
	moduleScript = regexp.MustCompile(`<script type="module" src="([^"]+)"></script>`)
	moduleImport = regexp.MustCompile(`(?m)^\s*import\s[^;]*?from\s+"(\./[^"]+)"|^\s*import\s+"(\./[^"]+)"`)
)

// preload adds to a page's head a modulepreload link for every module its
// script imports, directly or not, so that the browser fetches them all
// at once instead of one level of imports after another (a page's modules
// are six levels deep). pagePath is where the page is served (its links
// are relative to it).
func preload(page []byte, pagePath string) ([]byte, error) {
	m := moduleScript.FindSubmatch(page)
	if m == nil {
		return page, nil
	}
	dir := pageDir(pagePath)
	entry := path.Join(dir, string(m[1]))
	if !strings.HasPrefix(entry, Prefix) {
		return nil, fmt.Errorf("module %s is not under %s", m[1], Prefix)
	}
	seen := map[string]bool{}
	var order []string
	var walk func(file string) error
	walk = func(file string) error { // file: a path under static/
		if seen[file] {
			return nil
		}
		seen[file] = true
		src, err := fs.ReadFile(static, "static/"+file)
		if err != nil {
			return err
		}
		for _, im := range moduleImport.FindAllSubmatch(src, -1) {
			if err := walk(path.Join(path.Dir(file), string(im[1])+string(im[2]))); err != nil {
				return err
			}
		}
		order = append(order, file)
		return nil
	}
	if err := walk(strings.TrimPrefix(entry, Prefix)); err != nil {
		return nil, err
	}
	var links bytes.Buffer
	for _, file := range order {
		if Prefix+file == entry {
			continue
		}
		rel := strings.TrimPrefix(Prefix+file, dir)
		fmt.Fprintf(&links, "<link rel=\"modulepreload\" href=\"%s\">\n", rel)
	}
	at := bytes.Index(page, m[0])
	return slices.Concat(page[:at], links.Bytes(), page[at:]), nil
}

// newFile makes a file ready to serve: its type, ETag and, where it pays,
// its gzip-compressed body.
func newFile(name string, body []byte, page bool) *file {
	sum := sha256.Sum256(body)
	f := &file{name: name, body: body, ctype: contentTypes[path.Ext(name)], etag: hex.EncodeToString(sum[:12]), page: page}
	if f.ctype == "" {
		f.ctype = "application/octet-stream"
	}
	if path.Ext(name) != ".png" && len(body) > 512 {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		_, _ = zw.Write(body)
		_ = zw.Close()
		if b.Len() < len(body)*9/10 {
			f.gz = b.Bytes()
		}
	}
	return f
}

// Routes returns the patterns to mount on the query port
// (query.Config.Handlers): one per page and file (GET / exactly, GET
// /ui/contract, GET /ui/js/api.js, ...). Every other path stays the API's,
// so an unknown path, under /ui/ too, still gets the API's JSON 404.
func (h *Handler) Routes() map[string]http.Handler {
	routes := map[string]http.Handler{}
	for p := range h.files {
		if p == "/" {
			routes["GET /{$}"] = h
		} else {
			routes["GET "+p] = h
		}
	}
	return routes
}

// Paths returns the request paths of every page and file, sorted pages first.
func (h *Handler) Paths() []string {
	var pages, files []string
	for p, f := range h.files {
		if f.page {
			pages = append(pages, p)
		} else {
			files = append(files, p)
		}
	}
	slices.Sort(pages)
	slices.Sort(files)
	return append(pages, files...)
}

// ServeHTTP serves a page or a file; other paths get a JSON 404 like the
// API's.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := h.files[r.URL.Path]
	if f == nil {
		body, _ := json.Marshal(map[string]string{"code": "not_found", "message": "no such resource: " + r.URL.Path})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write(append(body, '\n'))
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", f.ctype)
	hd.Set("Cache-Control", CacheControl)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	if f.page || strings.HasSuffix(f.name, "-worker.js") {
		// (A worker's policy is its script's own: it inherits none.)
		hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	}
	if f.page {
		hd.Set("X-Frame-Options", "DENY")
	}
	body, etag := f.body, `"`+f.etag+`"`
	if f.gz != nil {
		hd.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			body, etag = f.gz, `"`+f.etag+`-gz"`
			hd.Set("Content-Encoding", "gzip")
		}
	}
	hd.Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reports whether the request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
