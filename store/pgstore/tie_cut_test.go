package pgstore

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

// cutProxy forwards TCP connections to a server. cut stops forwarding in
// both directions without closing anything (a network cut: each side sees
// silence); drop then closes the server's side of every connection (what
// a middlebox's timeout, or the server's own keepalive, does at the end of
// a long cut), which the clients do not see.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	server []net.Conn
	client []net.Conn
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range append(p.server, p.client...) {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.server, p.client = append(p.server, s), append(p.client, c)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(s, c) })
		p.wg.Go(func() { p.pipe(c, s) })
	}
}

// pipe copies src to dst, and drops what it reads while cut.
func (p *cutProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if n > 0 && !cut {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err == io.EOF && !cut {
				dst.Close()
			}
			return
		}
	}
}

func (p *cutProxy) setCut() { p.mu.Lock(); p.cut = true; p.mu.Unlock() }

// drop closes the server's side of every connection.
func (p *cutProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.server {
		s.Close()
	}
}

// A member's tied connection is cut off (a network cut of that connection
// alone: the member's renewals go on), and at the end of the cut its
// server side is dropped, which frees the lock, while the member sees
// nothing. The member takes its tie for lost (and fences) once a watch
// goes unanswered for watchDeadline, before the server side can be
// dropped by anything whose timeout is above that bound: the session ends
// (the grace after the drop) only after the member has fenced.
func TestTieCutThenDroppedLostFirst(t *testing.T) {
	direct := openTest(t)
	u, err := url.Parse(withOptions(testURL(), "schema", direct.schema))
	if err != nil {
		t.Fatal(err)
	}
	p := newCutProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	viaProxy, err := Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer viaProxy.Close()
	const group = "tie-cut"
	cfg := store.TieConfig{TTL: 2 * time.Second, Grace: tieGrace}
	a, tieA := storetest.Tied(ctx, t, viaProxy, group, "a", cfg)
	b, _ := storetest.Tied(ctx, t, direct, group, "b", cfg)
	// a's renewals, as a member's, go through direct: only the tied
	// connection is cut.
	stopRenew := make(chan struct{})
	var renew sync.WaitGroup
	renew.Go(func() {
		for {
			select {
			case <-stopRenew:
				return
			case <-time.After(cfg.TTL / 4):
				_, _ = direct.KeepAlive(ctx, group, a, cfg.TTL)
			}
		}
	})
	defer func() { close(stopRenew); renew.Wait() }()
	v := storetest.Version(ctx, t, direct, group)

	lost := make(chan time.Time, 1)
	go func() {
		select {
		case <-tieA.Lost():
			lost <- time.Now()
		case <-ctx.Done():
		}
	}()
	cutAt := time.Now()
	p.setCut()
	dropAt := cutAt.Add(watchDeadline(cfg.TTL))
	time.Sleep(time.Until(dropAt)) // the earliest a timeout at the bound drops it
	p.drop()
	ended := storetest.WaitExpired(ctx, t, direct, group, v, a, 10*time.Second)
	var lostAt time.Time
	select {
	case lostAt = <-lost:
		if lostAt.After(ended) {
			t.Errorf("a's tie lost %v after the cut, after its session ended (%v)", lostAt.Sub(cutAt), ended.Sub(cutAt))
		}
	case <-time.After(time.Second): // the goroutine's wake-up

		t.Fatalf("a's session ended %v after the cut, and a's tie was not lost: a would still run its handlers",
			ended.Sub(cutAt).Round(time.Millisecond))
	}
	t.Logf("cut at 0; a's tie lost by %v (%v); server side dropped at %v; session ended at %v (b %s watched)",
		lostAt.Sub(cutAt).Round(time.Millisecond), tieA.Err(), dropAt.Sub(cutAt).Round(time.Millisecond),
		ended.Sub(cutAt).Round(time.Millisecond), b)
}
