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
	Forward(t, ln, target, p.copyDown)
	// Cleanups run last first: the valve opens before the connections
	// close, so that no copy waits on it.
	t.Cleanup(func() { p.Set(false) })
	return p
}

// Forward accepts connections on ln and forwards each to target, the
// server's bytes through down (nil: as they come), until t ends: then it
// closes ln and the connections and waits for its goroutines. It returns
// the count of the connections accepted so far.
func Forward(t testing.TB, ln net.Listener, target string, down func(c, s net.Conn)) (accepted func() int) {
	if down == nil {
		down = func(c, s net.Conn) { _, _ = io.Copy(c, s) }
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		count int
		conns []net.Conn
	)
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
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
				_ = c.Close()
				continue
			}
			mu.Lock()
			count++
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
			wg.Go(func() { down(c, s); _ = c.Close() })
		}
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return count
	}
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
