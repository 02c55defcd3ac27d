//go:build linux

package pgstore

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/loopns"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

// An OpenSession given up on while the network is cut leaves nothing for
// the kernel to send after the heal: its connection is reset as the call
// fails. Before, pgx kept the connection open for 15 s after the call
// failed (a cancel request, then a Terminate message and a read until
// that deadline), the request still in its send queue, which the kernel
// sent again on its back-off: a heal within those seconds and the server
// opened a session that nobody renews.
func TestOpenSessionGivenUpIsNotSentAfterTheCut(t *testing.T) {
	requireServer(t)
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	ns := loopns.New(t)
	fwd := ns.Forward(t, u.Host)
	u.Host = fwd
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := open(ctx, withOptions(u.String(), "schema", newSchema(t), "listen", "off"), ns.Dial)
	if err != nil {
		t.Fatalf("Open through the namespace: %v", err)
	}
	defer s.Close()
	const group = "given-up"
	// An open made first prepares the statement on a connection made
	// before the cut (one dialed during it sends nothing), so that the
	// open below sends its request whole.
	other, err := s.OpenSession(ctx, group, "m0", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	_, ps, _ := net.SplitHostPort(fwd)
	port, _ := strconv.Atoi(ps)
	// The client's connections to the forwarder holding data. One still
	// connecting holds only its SYN: pgx's cancel request, made on a new
	// connection, which cannot run the call.
	unsent := func() []loopns.Socket {
		var out []loopns.Socket
		for _, so := range ns.Sockets(t) {
			if so.Remote == port && so.Unsent > 0 && so.State != "SYN_SENT" {
				out = append(out, so)
			}
		}
		return out
	}

	ns.Loopback(t, false) // the cut
	octx, ocancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = s.OpenSession(octx, group, "m1", 1, time.Minute)
	ocancel()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("OpenSession during the cut: %v; want store.ErrUnavailable", err)
	}
	if l := unsent(); len(l) > 0 {
		t.Fatalf("a connection still holds the request of a call given up on (%+v): the kernel will send it after the heal", l)
	}
	ns.Loopback(t, true) // the heal
	id, err := s.OpenSession(ctx, group, "m1", 1, time.Minute)
	if err != nil {
		t.Fatalf("OpenSession after the heal: %v", err)
	}
	storetest.WantSessions(t, s, group, other, id)
}
