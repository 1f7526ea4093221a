package storagetest

import (
	"bufio"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// echo serves lines back on network, until the test ends.
func echo(t *testing.T, network, addr string) string {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					if _, err := c.Write(line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip writes a line on c and reads it back.
func roundTrip(c net.Conn) error {
	if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadBytes('\n')
	return err
}

// echoing dials addr, closed when the test ends, and fails the test unless
// the connection echoes.
func echoing(t *testing.T, network, addr, when string) net.Conn {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := roundTrip(c); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	return c
}

// TestProxyCutAndRestore: through the proxy a connection echoes; Cut closes
// it and refuses new ones; after Restore, on the same address, a new one
// echoes again. On TCP and on a Unix socket.
func TestProxyCutAndRestore(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ network, server, proxy string }{
		{"tcp", "127.0.0.1:0", "127.0.0.1:0"},
		{"unix", filepath.Join(dir, "server.socket"), filepath.Join(dir, "proxy.socket")},
	} {
		t.Run(c.network, func(t *testing.T) {
			p, err := NewProxyOn(c.network, c.proxy, echo(t, c.network, c.server))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			addr := p.Addr()
			conn := echoing(t, c.network, addr, "before the cut")
			if err := p.Cut(); err != nil {
				t.Fatal(err)
			}
			if err := roundTrip(conn); err == nil {
				t.Fatal("a connection still echoes after the cut")
			}
			if c2, err := net.Dial(c.network, addr); err == nil {
				c2.Close()
				t.Fatal("the proxy accepts connections after the cut")
			}
			if err := p.Restore(); err != nil {
				t.Fatal(err)
			}
			if p.Addr() != addr {
				t.Fatalf("restored on %s, was %s", p.Addr(), addr)
			}
			echoing(t, c.network, addr, "after the restore")
		})
	}
}

// TestProxyDrop: Drop closes the connections through the proxy and goes on
// accepting new ones.
func TestProxyDrop(t *testing.T) {
	p, err := NewProxy(echo(t, "tcp", "127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	conn := echoing(t, "tcp", p.Addr(), "before the drop")
	p.Drop()
	if err := roundTrip(conn); err == nil {
		t.Fatal("a connection still echoes after the drop")
	}
	echoing(t, "tcp", p.Addr(), "after the drop")
}
