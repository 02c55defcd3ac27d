//go:build linux

package pgstore

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/loopns"
	"github.com/herdhq/herd/store"
)

// A dial made while the network is cut does not hold the pool back after
// the heal. Its SYN is lost, and the kernel sends it again 1 s, 3 s, 7 s...
// after the first (Linux 6.5 and later send the first four 1 s apart,
// tcp_syn_linear_timeouts; the test's namespace turns that off, as a cut
// of more than 4 s does). The pool, full with that dial (one connection
// here, as a member's few are during a cut), gave a call made after the
// heal its slot only when the dial ended: at the kernel's next SYN or at
// the connect timeout, 4 s after the heal here, so an OpenSession with a
// deadline of 2 s failed (docs/partitions.md: a member's OpenSession
// failed so after a heal, up to 1 s late with the linear SYNs).
func TestDialDuringACutDoesNotHoldThePoolAfterTheHeal(t *testing.T) {
	requireServer(t)
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	ns := loopns.New(t)
	ns.Sysctl(t, "ipv4/tcp_syn_linear_timeouts", "0")
	fwd := ns.Forward(t, u.Host)
	u.Host = fwd
	_, ps, _ := net.SplitHostPort(fwd)
	port, _ := strconv.Atoi(ps)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// One connection, and a connect timeout past the kernel's fourth SYN:
	// the dial made during the cut is the pool's only one, and lives on.
	raw := withOptions(u.String(), "schema", newSchema(t), "listen", "off", "pool_max_conns", "1", "connect_timeout", "20")
	s, err := open(ctx, raw, ns.Dial)
	if err != nil {
		t.Fatalf("Open through the namespace: %v", err)
	}
	defer s.Close()
	const group = "dial-cut"
	if _, err := s.OpenSession(ctx, group, "m0", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	s.pool.Reset() // the next call dials

	ns.Loopback(t, false) // the cut
	octx, ocancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = s.OpenSession(octx, group, "m1", 1, time.Minute)
	ocancel()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("OpenSession during the cut: %v; want store.ErrUnavailable", err)
	}
	// The dial's first SYN sent twice more, 1 s and 3 s after it: the
	// next is due 4 s later.
	waitSockets(ctx, t, ns, func(l []loopns.Socket) bool {
		for _, so := range l {
			if so.Remote == port && so.State == "SYN_SENT" && so.Retransmits >= 2 {
				return true
			}
		}
		return false
	})
	ns.Loopback(t, true) // the heal
	healed := time.Now()
	hctx, hcancel := context.WithTimeout(ctx, 2*time.Second)
	defer hcancel()
	if _, err := s.OpenSession(hctx, group, "m2", 1, time.Minute); err != nil {
		t.Fatalf("OpenSession within 2 s of the heal: %v; the pool waited for the dial made during the cut", err)
	}
	t.Logf("OpenSession after the heal returned %v after it", time.Since(healed).Round(time.Millisecond))
}

// While the network is cut, Open fails at the connect timeout with
// ErrUnavailable and an error that says the connect timed out, however
// many attempts were under way.
func TestOpenDuringACutFailsAtTheConnectTimeout(t *testing.T) {
	requireServer(t)
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	ns := loopns.New(t)
	u.Host = ns.Forward(t, u.Host)
	ns.Loopback(t, false)
	start := time.Now()
	s, err := open(t.Context(), withOptions(u.String(), "schema", newSchema(t), "connect_timeout", "1"), ns.Dial)
	took := time.Since(start)
	if err == nil {
		s.Close()
		t.Fatal("Open with the network cut succeeded")
	}
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "dial error: timeout") {
		t.Fatalf("Open with the network cut: %v; want store.ErrUnavailable saying the dial timed out", err)
	}
	if took < time.Second {
		t.Fatalf("Open with the network cut failed after %v, before its connect timeout of 1 s: %v", took, err)
	}
	t.Logf("Open failed after %v: %v", took.Round(time.Millisecond), err)
}

// waitSockets waits until ok holds for n's sockets or ctx ends.
func waitSockets(ctx context.Context, t *testing.T, n *loopns.NS, ok func([]loopns.Socket) bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !ok(n.Sockets(t)) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for the namespace's sockets: %v; they are %+v", ctx.Err(), n.Sockets(t))
		}
	}
}
