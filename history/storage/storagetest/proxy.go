// Package storagetest holds helpers for tests of the storage layer's
// users: a proxy in front of a database (or a node's socket) that a test
// can stop forwarding, as a network partition that keeps the TCP sessions
// open would, drop the sessions, or cut, as a network that drops them and
// refuses new ones would.
package storagetest

import (
	"net"
	"net/url"
	"os"
	"sync"
)

// Proxy forwards connections to a server. Pause stops forwarding in both
// directions (the connections stay open, their bytes wait), Resume
// forwards again. Drop closes every connection; Cut closes them and stops
// listening, Restore listens again on the same address.
type Proxy struct {
	network, addr, target string

	mu      sync.Mutex
	ln      net.Listener // nil while cut
	paused  bool
	resumed chan struct{} // closed by Resume
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port).
func NewProxy(target string) (*Proxy, error) { return NewProxyOn("tcp", "127.0.0.1:0", target) }

// NewProxyOn listens on addr of network ("tcp" or "unix": a socket file
// left at addr is removed first) and forwards to target on the same
// network.
func NewProxyOn(network, addr, target string) (*Proxy, error) {
	p := &Proxy{network: network, target: target, resumed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.resumed)
	if err := p.listen(addr); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Proxy) listen(addr string) error {
	if p.network == "unix" {
		_ = os.Remove(addr)
	}
	ln, err := net.Listen(p.network, addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// URL returns dbURL (a PostgreSQL URL) with its host and port replaced by
// the proxy's.
func (p *Proxy) URL(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	u.Host = p.Addr()
	return u.String(), nil
}

// Pause stops forwarding.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.resumed = make(chan struct{})
	}
}

// Resume forwards again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resumed)
	}
}

// Drop closes every connection, with no close handshake on either side
// (a network failure), and goes on listening.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked()
}

func (p *Proxy) dropLocked() {
	for c := range p.conns {
		_ = c.Close()
	}
}

// Cut stops listening and closes every connection.
func (p *Proxy) Cut() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.ln != nil {
		err = p.ln.Close()
		p.ln = nil
	}
	p.dropLocked()
	return err
}

// Restore listens again on the proxy's address after Cut (which may take a
// moment to be free: an error says so).
func (p *Proxy) Restore() error { return p.listen(p.Addr()) }

// Close stops listening, cuts every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	err := p.Cut()
	p.Resume()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial(p.network, p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(out, in)
		go p.pipe(in, out)
	}
}

// pipe copies from src to dst, holding each chunk while the proxy is
// paused.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			wait := p.resumed
			p.mu.Unlock()
			<-wait
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
