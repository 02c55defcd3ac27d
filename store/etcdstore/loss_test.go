//go:build linux

package etcdstore

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/store"
)

// netns is a network namespace of the test's own (it needs root). Its
// loopback carries the client's connections to a forwarder; setting it
// down loses every packet on them, as a network cut does, so the
// kernel's TCP sends its segments again on its back-off.
type netns struct{ fd int }

func newNetns(t *testing.T) *netns {
	t.Helper()
	type made struct {
		fd  int
		err error
	}
	ch := make(chan made)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- made{-1, err}
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		ch <- made{fd, err}
	}()
	m := <-ch
	if errors.Is(m.err, unix.EPERM) {
		t.Skip("a network namespace needs root (CAP_SYS_ADMIN); skipping")
	}
	if m.err != nil {
		t.Fatalf("a network namespace: %v", m.err)
	}
	t.Cleanup(func() { _ = unix.Close(m.fd) })
	return &netns{fd: m.fd}
}

// do runs f on a thread in n (thrown away after).
func (n *netns) do(f func() error) error {
	ch := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			ch <- err
			return
		}
		ch <- f()
	}()
	return <-ch
}

// loopback sets n's loopback up or down.
func (n *netns) loopback(t *testing.T, up bool) {
	t.Helper()
	err := n.do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ifr, err := unix.NewIfreq("lo")
		if err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
			return err
		}
		flags := ifr.Uint16()
		if up {
			flags |= unix.IFF_UP
		} else {
			flags &^= unix.IFF_UP
		}
		ifr.SetUint16(flags)
		return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
	})
	if err != nil {
		t.Fatalf("setting the namespace's loopback up=%v: %v", up, err)
	}
}

// dial connects to addr from n.
func (n *netns) dial(ctx context.Context, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.do(func() error {
		var err error
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

// forward listens on n's loopback and forwards every connection to
// target (outside n); it returns the address and the count of the
// connections accepted so far.
func (n *netns) forward(t *testing.T, target string) (string, func() int) {
	t.Helper()
	var ln net.Listener
	if err := n.do(func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		accepted int
		conns    []net.Conn
		wg       sync.WaitGroup
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
			accepted++
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
			wg.Go(func() { _, _ = io.Copy(c, s); _ = c.Close() })
		}
	})
	return ln.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return accepted
	}
}

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

	ns.loopback(t, false) // the cut
	rctx, rcancel := context.WithTimeout(ctx, 600*time.Millisecond)
	_, err := s.KeepAlive(rctx, group, sess, time.Minute)
	rcancel()
	ns.loopback(t, true) // the heal
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

	ns.loopback(t, false) // the cut
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
	ns.loopback(t, true) // the heal
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
func lossSetup(t *testing.T, group string) (context.Context, *netns, *Store, string, func() int) {
	t.Helper()
	u := etcdtest.Need(t)
	ns := newNetns(t)
	ns.loopback(t, true)
	addr, accepted := ns.forward(t, strings.TrimPrefix(u, "etcd://"))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	s, err := open(ctx, "etcd://"+addr, ns.dial)
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
