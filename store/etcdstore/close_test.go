package etcdstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/internal/valve"
)

// TestCloseSessionDoesNotWaitForTheRevocation: CloseSession returns once
// its transaction is done (the session's keys are deleted), without
// waiting for the revocation of the session's lease, which holds no key
// any more and ends with its TTL anyway. Before, a close whose
// revocation got no answer returned up to 5 s past its caller's deadline:
// an OpenSession closing first a session that an earlier failed open may
// have opened spent that long.
func TestCloseSessionDoesNotWaitForTheRevocation(t *testing.T) {
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
	const group = "close-revoke"
	sess, err := s.OpenSession(ctx, group, "m1", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	// The server's replies are held from the close's transaction on.
	s.afterCloseCommit = func() { proxy.Set(true) }
	const deadline = 300 * time.Millisecond
	cctx, ccancel := context.WithTimeout(ctx, deadline)
	start := time.Now()
	err = s.CloseSession(cctx, group, sess)
	took := time.Since(start)
	ccancel()
	s.afterCloseCommit = nil
	proxy.Set(false)
	if err != nil {
		t.Fatalf("CloseSession whose transaction was answered: %v", err)
	}
	if took > deadline+2*time.Second {
		t.Errorf("CloseSession returned %v after it was called, its deadline %v; want it once its transaction is done", took, deadline)
	}
	if live := keysUnder(t, c, s.groupKey(group)+"s/"); len(live) != 0 {
		t.Errorf("live sessions after the close: %v; want none", live)
	}
	if err := s.DeleteGroup(ctx, group, true); err != nil {
		t.Fatal(err)
	}
}
