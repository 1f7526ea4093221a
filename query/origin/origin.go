// Package origin parses and matches browser origins (RFC 6454): the
// allowed-origin lists of the query API's CORS and of the streaming
// WebSocket. An origin is scheme://host[:port], compared exactly after
// normalisation (lower case, the scheme's default port dropped); "*" alone
// allows any origin.
package origin

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Any is the entry of a list that allows every origin.
const Any = "*"

// List is a parsed list of allowed origins. The zero List allows none.
type List struct {
	any     bool
	origins map[string]struct{}
}

// Parse checks and normalises a list of origins (empty entries are
// skipped). An entry that is not "*" must be scheme://host[:port], with
// nothing after it: no path, not even "/", no query, no user.
func Parse(entries []string) (List, error) {
	var l List
	for _, e := range entries {
		e = strings.TrimSpace(e)
		switch e {
		case "":
			continue
		case Any:
			l.any = true
			continue
		}
		o, err := Normalize(e)
		if err != nil {
			return List{}, err
		}
		if l.origins == nil {
			l.origins = map[string]struct{}{}
		}
		l.origins[o] = struct{}{}
	}
	return l, nil
}

// Normalize returns the canonical form of an origin, or an error that says
// what is wrong with it and what an origin looks like.
func Normalize(s string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("origin %q: %s; an origin is scheme://host[:port], like https://dapp.example or http://localhost:5173 (or * alone for any origin)", s, why)
	}
	if strings.Contains(s, "*") {
		return bad("wildcards are not supported: list each origin")
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return bad("not a URL")
	case u.Scheme == "" || u.Opaque != "" || !strings.HasPrefix(s[len(u.Scheme):], "://"):
		return bad("the scheme:// is missing")
	case u.User != nil:
		return bad("it has a user")
	case u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
		hint := u.Scheme + "://" + u.Host
		return bad(fmt.Sprintf("it has a path, query or fragment (write %s)", hint))
	case u.Hostname() == "":
		return bad("the host is missing")
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if strings.HasSuffix(u.Host, ":") && port == "" {
		return bad("the port is empty")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return bad("the port is not 1 to 65535")
		}
		port = strconv.Itoa(n)
		if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
			port = "" // browsers leave the default port out
		}
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

// Any reports whether the list allows every origin ("*").
func (l List) Any() bool { return l.any }

// Empty reports whether the list allows no origin.
func (l List) Empty() bool { return !l.any && len(l.origins) == 0 }

// Allows reports whether a request's Origin header value is allowed.
// "null" (sandboxed pages, files) and malformed values match only "*".
func (l List) Allows(origin string) bool {
	if l.any {
		return true
	}
	if len(l.origins) == 0 {
		return false
	}
	o, err := Normalize(origin)
	if err != nil {
		return false
	}
	_, ok := l.origins[o]
	return ok
}

// With returns a list that also allows the given (already valid) origins.
func (l List) With(origins ...string) List {
	out := List{any: l.any, origins: make(map[string]struct{}, len(l.origins)+len(origins))}
	for o := range l.origins {
		out.origins[o] = struct{}{}
	}
	for _, o := range origins {
		if n, err := Normalize(o); err == nil {
			out.origins[n] = struct{}{}
		}
	}
	return out
}

// OfListener returns the origins of pages served at a listening address
// (host:port): for a loopback or unspecified host (0.0.0.0, ::, empty)
// http://127.0.0.1:PORT, http://localhost:PORT and http://[::1]:PORT;
// otherwise http://HOST:PORT. It never looks at a request's Host header,
// which a DNS-rebinding page controls.
func OfListener(addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return nil
	}
	ip := net.ParseIP(host)
	if host == "" || strings.EqualFold(host, "localhost") || (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) {
		return []string{"http://127.0.0.1:" + port, "http://localhost:" + port, "http://[::1]:" + port}
	}
	return []string{"http://" + net.JoinHostPort(host, port)}
}
