package proctest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy is a TCP forwarder to one Redis that the test can cut: Cut closes
// every current connection and holds new ones (accepted, never answered, as
// a network partition would leave them) until Restore, which drops the held
// ones (so no request sent during the cut reaches Redis late) and forwards
// new connections again.
type proxy struct {
	ln     net.Listener
	target string
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	mu       sync.Mutex
	cut      bool
	restored chan struct{} // closed when the current cut ends
	conns    map[net.Conn]struct{}
	closed   bool
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &proxy{ln: ln, target: target, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection and holds new ones until Restore.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return
	}
	p.cut = true
	p.restored = make(chan struct{})
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore ends the cut.
func (p *proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		return
	}
	p.cut = false
	close(p.restored)
}

// Close stops the proxy and closes every connection.
func (p *proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
		for c := range p.conns {
			_ = c.Close()
		}
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track registers c so that Cut and Close close it; false if the proxy is
// closed or, with failIfCut, cut (c is closed then).
func (p *proxy) track(c net.Conn, failIfCut bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || (failIfCut && p.cut) {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *proxy) serve(c net.Conn) {
	defer p.wg.Done()
	if !p.track(c, false) {
		return
	}
	defer p.untrack(c)
	p.mu.Lock()
	if p.cut {
		restored := p.restored
		p.mu.Unlock()
		select {
		case <-restored:
		case <-p.done:
		}
		return // dropped: the client reconnects
	}
	p.mu.Unlock()
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		return
	}
	if !p.track(up, true) {
		return // cut while dialling
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
}
