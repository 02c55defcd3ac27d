package etcdstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/internal/valve"
	"github.com/herdhq/herd/store"
)

// A session opened by a call whose reply was lost (the cluster ran its
// transaction) is closed by the next OpenSession of the group, and the
// call that lost its reply fails on its deadline. Before, the call then
// waited up to 5 s more for the revocation of its lease (whose reply was
// lost too), and the session stayed logged as open, counted by every
// member until another member's renewal found its lease gone.
func TestOpenSessionClosesASessionWhoseReplyWasLost(t *testing.T) {
	u := etcdtest.Need(t)
	proxy := valve.New(t, strings.TrimPrefix(u, "etcd://"))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := open(ctx, "etcd://"+proxy.Addr, nil)
	if err != nil {
		t.Fatalf("Open through the proxy: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := direct(t, u)
	s.prefix = testPrefix(t, c)
	const group = "lost-reply"
	other, err := s.OpenSession(ctx, group, "m0", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	// The server's replies are held from the open's transaction on: its
	// lease is granted and the group's sequence read before.
	s.beforeOpenCommit = func() { proxy.Set(true) }
	const deadline = 300 * time.Millisecond
	octx, ocancel := context.WithTimeout(ctx, deadline)
	start := time.Now()
	_, err = s.OpenSession(octx, group, "m1", 1, time.Minute)
	took := time.Since(start)
	ocancel()
	s.beforeOpenCommit = nil
	proxy.Set(false)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("OpenSession whose reply is held: %v; want store.ErrUnavailable", err)
	}
	if took > deadline+2*time.Second {
		t.Errorf("OpenSession whose reply is held returned %v after it was called; want it at its deadline (%v)", took, deadline)
	}
	g := s.groupKey(group)
	waitFor(t, 10*time.Second, "the cluster to have opened the session whose reply was lost", func() bool {
		return len(keysUnder(t, c, g+"m/")) == 2
	})
	id, err := s.OpenSession(ctx, group, "m1", 1, time.Minute)
	if err != nil {
		t.Fatalf("OpenSession after the reply was lost: %v", err)
	}
	want := []string{other, id}
	slices.Sort(want)
	if logged := keysUnder(t, c, g+"m/"); !slices.Equal(logged, want) {
		t.Errorf("sessions logged as open: %v; want %v (a call that failed opened the others)", logged, want)
	}
	if live := keysUnder(t, c, g+"s/"); !slices.Equal(live, want) {
		t.Errorf("live sessions: %v; want %v (a call that failed opened the others)", live, want)
	}
	if err := s.DeleteGroup(ctx, group, true); err != nil {
		t.Fatal(err)
	}
}

// keysUnder lists the keys under prefix, without it, sorted.
func keysUnder(t *testing.T, c *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := c.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, strings.TrimPrefix(string(kv.Key), prefix))
	}
	slices.Sort(out)
	return out
}
