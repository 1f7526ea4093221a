package query

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/marlowe-follower/follower/query/origin"
)

// DefaultCORSMaxAge is how long a browser may keep a preflight's answer.
const DefaultCORSMaxAge = 10 * time.Minute

// CORS says which browser pages of other origins may use the API (and
// everything else the port serves: Config.Handlers such as /events and
// /streams). Credentials (cookies) are not supported:
// Access-Control-Allow-Credentials is never sent; a bearer token goes in
// the Authorization header, which preflights allow.
type CORS struct {
	// Origins are the allowed origins, each scheme://host[:port]
	// (https://dapp.example, http://localhost:5173), or "*" for any.
	// Empty: none; answers carry no CORS headers and every preflight is
	// refused (403), so only same-origin pages can read the API.
	Origins []string
	// MaxAge is how long a browser may cache a preflight's answer
	// (DefaultCORSMaxAge).
	MaxAge time.Duration
}

// CORSRequestHeaders are the request headers preflights allow: those of
// the API (Range for the Runtime-style pages, Authorization for the
// streams' bearer token, Last-Event-ID for resuming events), those the
// Marlowe TS SDK sends (axios: Accept, Content-Type; its transaction
// builders' X-Address family), and the CORS-safelisted ones with any value.
var CORSRequestHeaders = []string{
	"Accept", "Accept-Language", "Authorization", "Cache-Control", "Content-Language", "Content-Type",
	"If-Modified-Since", "If-None-Match", "Last-Event-ID", "Range",
	"X-Address", "X-Change-Address", "X-Collateral-UTxO", "X-Stake-Address",
}

// CORSExposedHeaders are the response headers pages may read: the position
// headers of every answer, paging, Retry-After, the Runtime-style headers,
// and the headers of errors (Allow, WWW-Authenticate). TestCORSExposesEveryHeader
// fails when the package sets a header that is not here.
var CORSExposedHeaders = []string{
	HeaderSeq, HeaderBlockSlot, HeaderBlockNo, HeaderBlockHash, HeaderNodeTip, HeaderNodeTipNo, HeaderRetryAfter,
	"Accept-Ranges", "Content-Range", "Next-Range", "Prev-Range", "Total-Count",
	"X-Network-Id", "X-Runtime-Chain-Tip", "X-Runtime-Tip", "X-Runtime-Version", "X-Marlowe-Follower-Version",
	"Allow", "WWW-Authenticate",
}

var (
	corsAllowHeaders  = strings.Join(CORSRequestHeaders, ", ")
	corsExposeHeaders = strings.Join(CORSExposedHeaders, ", ")
)

// corsProbeMethods are the methods besides GET and HEAD that a preflight
// may be answered with, where the server has a route for them.
var corsProbeMethods = []string{http.MethodDelete, http.MethodPost, http.MethodPut, http.MethodPatch}

// cors applies the CORS policy in front of the routes.
type cors struct {
	allowed origin.List
	maxAge  string
	mux     *http.ServeMux
}

// withCORS returns the routes behind the CORS policy of cfg, or an error
// naming the origin that is not valid.
func withCORS(cfg CORS, mux *http.ServeMux) (http.Handler, error) {
	allowed, err := origin.Parse(cfg.Origins)
	if err != nil {
		return nil, err
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultCORSMaxAge
	}
	return &cors{allowed: allowed, maxAge: strconv.Itoa(int(cfg.MaxAge / time.Second)), mux: mux}, nil
}

// ServeHTTP answers preflights (OPTIONS with Origin and
// Access-Control-Request-Method) itself, before the routes' 404 and 405,
// and marks the answers of allowed origins; everything else goes to the
// routes unchanged.
func (c *cors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o := r.Header.Get("Origin")
	h := w.Header()
	if !c.allowed.Empty() {
		// Every answer depends on the Origin, also one to a request
		// without it (no CORS headers): caches must keep them apart.
		h.Add("Vary", "Origin")
	}
	if o == "" {
		c.mux.ServeHTTP(w, r)
		return
	}
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if c.allowed.Empty() {
		// Same-origin only: no CORS headers at all.
		if preflight {
			writeError(w, http.StatusForbidden, "origin_not_allowed",
				"cross-origin requests are not enabled on this server (origin "+strconv.Quote(o)+"): its cors.origins setting allows no origin")
			return
		}
		c.mux.ServeHTTP(w, r)
		return
	}
	ok := c.allowed.Allows(o)
	if preflight {
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
		if !ok {
			writeError(w, http.StatusForbidden, "origin_not_allowed",
				"origin "+strconv.Quote(o)+" is not allowed to use this API: its cors.origins setting lists the origins that are")
			return
		}
		c.allowOrigin(h, o)
		h.Set("Access-Control-Allow-Methods", c.methods(r))
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", c.maxAge)
		if strings.EqualFold(r.Header.Get("Access-Control-Request-Private-Network"), "true") {
			h.Set("Access-Control-Allow-Private-Network", "true")
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if ok {
		c.allowOrigin(h, o)
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	}
	c.mux.ServeHTTP(w, r)
}

func (c *cors) allowOrigin(h http.Header, o string) {
	if c.allowed.Any() {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", o)
	}
}

// methods lists the methods the path has routes for: GET and HEAD always
// (an unknown path's GET answers a readable 404), others where a route
// of that method takes them (DELETE /streams/{name}; a pattern without a
// method, such as the Runtime view's catch-all, answers them 405), and
// OPTIONS.
func (c *cors) methods(r *http.Request) string {
	ms := []string{http.MethodGet, http.MethodHead}
	for _, m := range corsProbeMethods {
		probe := r.WithContext(r.Context())
		probe.Method = m
		if _, pattern := c.mux.Handler(probe); strings.HasPrefix(pattern, m+" ") {
			ms = append(ms, m)
		}
	}
	return strings.Join(append(ms, http.MethodOptions), ", ")
}
