package etcdstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/store"
)

// cutProxy forwards TCP connections to one server and can cut them as a
// network partition does. Cut freezes every connection open at that
// instant for good: nothing more is forwarded either way (what TCP's
// retransmission back-off does for seconds after a heal), though the proxy
// still notices the client closing it. Connections made during the cut
// are held, unanswered, until Heal (a SYN sent again after the heal);
// Heal forwards them and every new one.
type cutProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu       sync.Mutex
	cut      bool
	healed   chan struct{} // closed by Heal
	done     chan struct{} // closed when the test ends
	links    map[*link]bool
	accepted int // connections accepted
	dropped  int // frozen connections the client closed
}

// link is one forwarded connection: client side c, server side s (nil
// until it is dialled).
type link struct {
	c, s   net.Conn
	frozen bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, healed: make(chan struct{}), done: make(chan struct{}), links: map[*link]bool{}}
	close(p.healed)
	t.Cleanup(func() {
		close(p.done)
		_ = ln.Close()
		p.mu.Lock()
		for l := range p.links {
			l.close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			l := &link{c: c}
			p.links[l] = true
			p.accepted++
			healed := p.healed
			p.mu.Unlock()
			p.wg.Go(func() { p.serve(l, healed) })
		}
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (l *link) close() {
	_ = l.c.Close()
	if l.s != nil {
		_ = l.s.Close()
	}
}

// serve forwards l once the network is healed (at once if it is).
func (p *cutProxy) serve(l *link, healed <-chan struct{}) {
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
		l.close()
	}()
	select {
	case <-healed:
	case <-p.done:
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	l.s = s
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(l, s, l.c, true); _ = s.Close() })
	wg.Go(func() { p.copy(l, l.c, s, false); _ = l.c.Close() })
	wg.Wait()
}

// copy forwards src to dst while l is not frozen; fromClient counts a
// frozen connection's end as the client's.
func (p *cutProxy) copy(l *link, dst, src net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		frozen := l.frozen
		if err != nil && frozen && fromClient {
			p.dropped++
		}
		p.mu.Unlock()
		if err != nil {
			return
		}
		if !frozen {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
}

// Cut freezes every open connection and holds new ones until Heal.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.healed = make(chan struct{})
	for l := range p.links {
		l.frozen = true
	}
}

// Heal forwards the held connections and new ones.
func (p *cutProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		p.cut = false
		close(p.healed)
	}
}

// counts are the connections accepted and the frozen ones the client
// closed.
func (p *cutProxy) counts() (accepted, dropped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.dropped
}

// TestConnectionDroppedAfterACut: a store's connection that crossed a
// network cut is dropped once a call on it fails on its deadline, so that
// the member back from the cut reaches etcd on a new connection, not on
// the one whose segments wait for TCP's retransmission. Before, the store
// kept it (the client's keep-alive drops it 15 s after its last answer),
// and a member cut off past its TTL opened its new session seconds after
// the heal (docs/partitions.md, etcd).
func TestConnectionDroppedAfterACut(t *testing.T) {
	u := etcdtest.Need(t)
	proxy := newCutProxy(t, strings.TrimPrefix(u, "etcd://"))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := Open(ctx, "etcd://"+proxy.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	dc := direct(t, u)
	s.prefix = testPrefix(t, dc)
	const group = "cut"
	const ttl = time.Second
	old, err := s.OpenSession(ctx, group, "m1", 1, ttl)
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}

	proxy.Cut()
	// A renewal (a lease keep-alive: a stream) and an open (a grant: a
	// unary call) during the cut fail on their deadlines, each having
	// waited silentMax with no answer (the proxy's kernel acknowledges
	// what it is sent: the client's sees no loss).
	for _, call := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := s.KeepAlive(ctx, group, old, ttl); return err },
		func(ctx context.Context) error { _, err := s.OpenSession(ctx, group, "m1", 1, ttl); return err },
	} {
		cctx, ccancel := context.WithTimeout(ctx, silentMax+200*time.Millisecond)
		err := call(cctx)
		ccancel()
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("a call during the cut: %v; want store.ErrUnavailable", err)
		}
	}
	waitFor(t, 5*time.Second, "the store dropping the connection that crossed the cut", func() bool {
		_, dropped := proxy.counts()
		return dropped > 0
	})
	// The session ends in the cluster while the member is cut off.
	waitFor(t, 10*time.Second, "the old session's lease to end", func() bool {
		s.mu.Lock()
		id := s.leases[old].id
		s.mu.Unlock()
		r, err := dc.TimeToLive(ctx, id)
		return err == nil && r.TTL == -1
	})

	proxy.Heal()
	// Back: the old session is gone, a new one opens, and a reader of the
	// log sees a claim made on a new connection (the watch resumed there).
	if _, err := s.KeepAlive(ctx, group, old, ttl); !errors.Is(err, store.ErrSessionExpired) {
		t.Fatalf("renewing the session that ended during the cut: %v; want store.ErrSessionExpired", err)
	}
	sess, err := s.OpenSession(ctx, group, "m1", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan []store.Change, 1)
	go func() {
		v := before.Version
		var all []store.Change
		for ctx.Err() == nil {
			cs, next, err := s.Changes(ctx, group, v, 100)
			if err != nil {
				break
			}
			all, v = append(all, cs...), next
			if len(cs) > 0 && cs[len(cs)-1].Kind == store.Claimed {
				break
			}
		}
		changes <- all
	}()
	if _, err := store.Claim(ctx, s, group, "p1", sess); err != nil {
		t.Fatal(err)
	}
	all := <-changes
	if len(all) == 0 || all[len(all)-1].Kind != store.Claimed {
		t.Fatalf("the log after the heal: %+v; want it to end with the claim", all)
	}
	if accepted, _ := proxy.counts(); accepted < 2 {
		t.Fatalf("%d connections through the proxy; want a new one after the cut", accepted)
	}
	if err := s.DeleteGroup(ctx, group, true); err != nil {
		t.Fatal(err)
	}
}

// direct is a client of the test server itself (not through a proxy),
// closed when t ends.
func direct(t *testing.T, u string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + strings.TrimPrefix(u, "etcd://")},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitFor waits until cond holds, failing t after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
