package pgstore

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/valve"
	"github.com/herdhq/herd/store"
)

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
	proxy := valve.New(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	host, port, err := net.SplitHostPort(proxy.Addr)
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
	proxy.Set(true)
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
	proxy.Set(false) // the heal
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
