// Package testport gives the tests of the marlowe-follower command and its
// packages a TCP port to start a service on: one that was free on the
// loopback interface a moment ago (the services take a port number, not a
// listener).
package testport

import (
	"net"
	"testing"
)

// Free returns a TCP port on 127.0.0.1 that was free a moment ago; the
// test fails when none can be had.
func Free(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
