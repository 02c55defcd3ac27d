//go:build linux

package redisstore

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/loopns"
	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/internal/valve"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

// An OpenSession given up on while the network is cut leaves nothing for
// the kernel to send after the heal: its connection is reset, not closed.
// Before, the request stayed in the closed socket's send queue, the kernel
// sent it again on its back-off, and Redis opened the session seconds
// after the heal, a session nobody renews (internal/netpart seeds 43 and
// 46: partitions handed to it sat idle until it expired).
func TestOpenSessionGivenUpIsNotSentAfterTheCut(t *testing.T) {
	raw := redistest.Need(t)
	u, err := url.Parse(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	ns := loopns.New(t)
	fwd := ns.Forward(t, u.Host)
	u.Host = fwd
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := open(ctx, u.String(), ns.Dial, WithPrefix(testPrefix(t, raw)))
	if err != nil {
		t.Fatalf("Open through the namespace: %v", err)
	}
	defer s.Close()
	const group = "given-up"
	// A call made first, so that the open below goes on a connection
	// made before the cut (one dialed during it sends nothing).
	if _, err := s.Snapshot(ctx, group); err != nil {
		t.Fatal(err)
	}

	_, ps, _ := net.SplitHostPort(fwd)
	port, _ := strconv.Atoi(ps)
	client := func() []loopns.Socket { // the client's sockets to the forwarder
		var out []loopns.Socket
		for _, so := range ns.Sockets(t) {
			if so.Remote == port {
				out = append(out, so)
			}
		}
		return out
	}
	if len(client()) == 0 {
		t.Fatal("no connection to the server before the cut: the open below would send nothing")
	}

	ns.Loopback(t, false) // the cut
	octx, ocancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = s.OpenSession(octx, group, "m1", 1, time.Minute)
	ocancel()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("OpenSession during the cut: %v; want store.ErrUnavailable", err)
	}
	waitForCond(t, 10*time.Second, "go-redis to close the connection of the call given up on", func() bool {
		for _, so := range client() {
			if so.State == "ESTABLISHED" && so.Unsent > 0 {
				return false
			}
		}
		return true
	})
	for _, so := range client() {
		if so.Unsent > 0 {
			t.Fatalf("a connection closed with the request of a call given up on still in its send queue (%+v): the kernel will send it after the heal", so)
		}
	}
	ns.Loopback(t, true) // the heal
	id, err := s.OpenSession(ctx, group, "m1", 1, time.Minute)
	if err != nil {
		t.Fatalf("OpenSession after the heal: %v", err)
	}
	storetest.WantSessions(t, s, group, id)
	must(t, s.DeleteGroup(ctx, group, true), "DeleteGroup")
}

// A session opened by a call whose reply was lost (the server ran it) is
// closed by the next OpenSession of the group (storetest.RunLostOpenReply).
func TestOpenSessionClosesASessionWhoseReplyWasLost(t *testing.T) {
	raw := redistest.Need(t)
	u, err := url.Parse(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := valve.New(t, u.Host)
	u.Host = proxy.Addr
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := Open(ctx, u.String(), WithPrefix(testPrefix(t, raw)))
	if err != nil {
		t.Fatalf("Open through the proxy: %v", err)
	}
	defer s.Close()
	storetest.RunLostOpenReply(t, s, proxy.Set)
}

// waitForCond waits until cond holds, checking every 10 ms; it fails t
// after within.
func waitForCond(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
