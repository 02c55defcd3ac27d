// Package valve is a TCP proxy for tests whose server-to-client direction
// can be shut: while shut, what the server sends waits in the proxy,
// unanswered, as across a link that went down (the server's TCP sends it
// again later, with back-off) or behind a server too busy to answer.
package valve

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from Addr to a server.
type Proxy struct {
	Addr   string // host:port to connect to instead of the server
	mu     sync.Mutex
	cond   *sync.Cond
	closed bool
}

// New starts a proxy to target; t's cleanup stops it and closes its
// connections.
func New(t testing.TB, target string) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String()}
	p.cond = sync.NewCond(&p.mu)
	var wg sync.WaitGroup
	var conns []net.Conn
	var cmu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		p.Set(false)
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, c, s)
			cmu.Unlock()
			wg.Go(func() { _, _ = io.Copy(s, c); s.Close() })
			wg.Go(func() { p.copyDown(c, s); c.Close() })
		}
	})
	return p
}

// copyDown copies the server's bytes to the client while the valve is open.
func (p *Proxy) copyDown(c, s net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.closed {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Set shuts (closed true) or opens the server-to-client direction.
func (p *Proxy) Set(closed bool) {
	p.mu.Lock()
	p.closed = closed
	p.mu.Unlock()
	p.cond.Broadcast()
}
