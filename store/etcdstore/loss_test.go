//go:build linux

package etcdstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/internal/loopns"
	"github.com/herdhq/herd/store"
)

// TestConnectionDroppedOnLoss: a renewal that fails on its deadline (well
// under silentMax) while the path loses every packet drops its
// connection, since the kernel is sending the request again, and the
// store's next call, after the heal, goes on a new connection, with the
// same session. Without the drop, the call waited for the old
// connection's next retransmission.
func TestConnectionDroppedOnLoss(t *testing.T) {
	const group = "loss"
	ctx, ns, s, sess, accepted := lossSetup(t, group)
	before := accepted()

	ns.Loopback(t, false) // the cut
	rctx, rcancel := context.WithTimeout(ctx, 600*time.Millisecond)
	_, err := s.KeepAlive(rctx, group, sess, time.Minute)
	rcancel()
	ns.Loopback(t, true) // the heal
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a renewal during the cut: %v; want store.ErrUnavailable", err)
	}
	if _, err := s.KeepAlive(ctx, group, sess, time.Minute); err != nil {
		t.Fatalf("renewing the session after the heal: %v", err)
	}
	if n := accepted(); n == before {
		t.Fatalf("the renewal after the heal went on the connection that crossed the cut (%d connections in all); want a new one", n)
	}
	if err := s.DeleteGroup(ctx, group, true); err != nil {
		t.Fatal(err)
	}
}

// TestStalledConnectionDroppedBeforeACall: a call made after a heal, while
// the connection that crossed the cut still waits for its next
// retransmission (a call on it got no answer, and has not failed yet),
// goes on a new connection.
func TestStalledConnectionDroppedBeforeACall(t *testing.T) {
	const group = "stalled"
	ctx, ns, s, sess, accepted := lossSetup(t, group)
	before := accepted()

	ns.Loopback(t, false) // the cut
	pending := make(chan error, 1)
	go func() {
		_, err := s.KeepAlive(ctx, group, sess, time.Minute)
		pending <- err
	}()
	waitFor(t, 10*time.Second, "the connection to stall", func() bool {
		s.conns.mu.Lock()
		defer s.conns.mu.Unlock()
		for _, c := range s.conns.open {
			if stalled(c.Conn) {
				return true
			}
		}
		return false
	})
	ns.Loopback(t, true) // the heal
	if _, err := s.KeepAlive(ctx, group, sess, time.Minute); err != nil {
		t.Fatalf("renewing the session after the heal: %v", err)
	}
	if n := accepted(); n == before {
		t.Fatalf("the renewal after the heal waited on the stalled connection (%d connections in all); want a new one", n)
	}
	<-pending // the call on the dropped connection: its outcome does not matter
	if err := s.DeleteGroup(ctx, group, true); err != nil {
		t.Fatal(err)
	}
}

// lossSetup opens a store on etcd through a network namespace of its own
// (whose loopback the test sets down and up) and a session in group; it
// returns a context of a minute, the namespace, the store, the session and
// how many connections the forwarder has accepted so far.
func lossSetup(t *testing.T, group string) (context.Context, *loopns.NS, *Store, string, func() int) {
	t.Helper()
	u := etcdtest.Need(t)
	ns := loopns.New(t)
	ns.Loopback(t, true)
	addr, accepted := ns.ForwardCounting(t, strings.TrimPrefix(u, "etcd://"))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return ns.Dial(ctx, "tcp", addr) }
	s, err := open(ctx, "etcd://"+addr, dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	s.prefix = testPrefix(t, direct(t, u))
	sess, err := s.OpenSession(ctx, group, "m1", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, ns, s, sess, accepted
}
