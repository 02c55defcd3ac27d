package pgstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// valveProxy forwards TCP connections to a server. While closed, what the
// server sends waits in the proxy, unanswered: a connection across a link
// that went down (the server's TCP retransmits it later, with back-off).
type valveProxy struct {
	addr   string
	mu     sync.Mutex
	cond   *sync.Cond
	closed bool
}

func newValveProxy(t *testing.T, target string) *valveProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &valveProxy{addr: ln.Addr().String()}
	p.cond = sync.NewCond(&p.mu)
	var wg sync.WaitGroup
	var conns []net.Conn
	var cmu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		p.set(false)
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
func (p *valveProxy) copyDown(c, s net.Conn) {
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

func (p *valveProxy) set(closed bool) {
	p.mu.Lock()
	p.closed = closed
	p.mu.Unlock()
	p.cond.Broadcast()
}

// A LISTEN connection whose notifications stop arriving while the store's
// calls fail (a cut: the server's notifications wait for its TCP's next
// retransmission, seconds after the network is back) is not trusted once a
// call has failed: waiting Changes calls read the log every poll interval
// and the store makes a new LISTEN connection. Before, the readers trusted
// the stale connection and slept until the backstop (here an hour), and a
// member back from a partition saw releases toward it seconds late.
func TestListenNotTrustedAfterAFailedCall(t *testing.T) {
	s := openTest(t, WithPollInterval(100*time.Millisecond), withBackstop(time.Hour))
	cfg := s.hub.connCfg
	proxy := newValveProxy(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	host, port, err := net.SplitHostPort(proxy.addr)
	if err != nil {
		t.Fatal(err)
	}
	pn, _ := strconv.Atoi(port)
	cfg.Host, cfg.Port = host, uint16(pn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "listen-stale"
	sess, v := claimWithListenUp(ctx, t, s, group)
	pid := s.hub.listenerPID()

	// The cut: the LISTEN connection goes silent, and a call times out.
	proxy.set(true)
	second := changesAsync(ctx, s, group, v)
	tctx, tcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = s.do(tctx, "test", func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, "SELECT pg_sleep(2)")
		return err
	})
	tcancel()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a call past its deadline: %v; want store.ErrUnavailable", err)
	}
	// Back: a claim (a release toward a member, after a heal) reaches the
	// reader though the old LISTEN connection still holds its notification.
	if _, err := store.Claim(ctx, s, group, "p2", sess); err != nil {
		t.Fatal(err)
	}
	wantEntry(t, second, store.Claimed, 5*time.Second, "a claim after a failed call, the LISTEN connection silent")
	proxy.set(false) // the heal
	waitFor(t, 15*time.Second, "a new LISTEN connection", func() bool {
		p := s.hub.listenerPID()
		return p != 0 && p != pid
	})
	third := changesAsync(ctx, s, group, versionOf(t, s, group))
	if _, err := store.Claim(ctx, s, group, "p3", sess); err != nil {
		t.Fatal(err)
	}
	wantEntry(t, third, store.Claimed, 5*time.Second, "a claim on the new LISTEN connection")
}

// versionOf is the group's version now.
func versionOf(t *testing.T, s *Store, group string) store.Version {
	t.Helper()
	snap, err := s.Snapshot(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Version
}
