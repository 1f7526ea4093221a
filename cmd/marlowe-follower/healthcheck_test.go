package main

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestHealthcheckQueryHost: healthcheck asks the address query.host names
// (--query-host, MARLOWE_RT_QUERY_HOST), 127.0.0.1 for every interface or
// none, and takes only the query settings it uses.
func TestHealthcheckQueryHost(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no loopback address 127.0.0.2: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)

	if code, out, stderr := runCLI(t, "", "healthcheck", "--query-host", "127.0.0.2", "--query-port", port); code != 0 {
		t.Fatalf("healthcheck --query-host 127.0.0.2: exit %d %q %q", code, out, stderr)
	}
	t.Setenv("MARLOWE_RT_QUERY_HOST", "127.0.0.2")
	if code, out, stderr := runCLI(t, "", "healthcheck", "--query-port", port); code != 0 {
		t.Fatalf("healthcheck with MARLOWE_RT_QUERY_HOST=127.0.0.2: exit %d %q %q", code, out, stderr)
	}
	// Every interface, or the default: asked on 127.0.0.1, where nothing
	// listens on that port (the server is on 127.0.0.2 only).
	for _, host := range []string{"0.0.0.0", ""} {
		t.Setenv("MARLOWE_RT_QUERY_HOST", host)
		code, _, stderr := runCLI(t, "", "healthcheck", "--query-port", port)
		if code != 1 || !strings.Contains(stderr, "http://127.0.0.1:"+port+"/healthz") {
			t.Fatalf("healthcheck on host %q: exit %d %q", host, code, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "", "healthcheck", "--ready-distance", "3"); code != 2 || !strings.Contains(stderr, "unknown flag") {
		t.Fatalf("healthcheck --ready-distance: exit %d %q", code, stderr)
	}
}
