// Package storagetest holds helpers for tests of the storage layer's
// users: a TCP proxy in front of a database that a test can stop
// forwarding, as a network partition that keeps the TCP sessions open
// would.
package storagetest

import (
	"net"
	"net/url"
	"sync"
)

// Proxy forwards TCP connections to a server. Pause stops forwarding in
// both directions (the connections stay open, their bytes wait), Resume
// forwards again.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	paused  bool
	resumed chan struct{} // closed by Resume
	conns   []net.Conn
	wg      sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, resumed: make(chan struct{})}
	close(p.resumed)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

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

// Close stops listening and cuts every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Resume()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
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
