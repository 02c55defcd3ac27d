package redisstore

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
)

// blockedClients counts the server's clients named name that are blocked
// (CLIENT LIST flags with "b": in XREAD BLOCK).
func blockedClients(t *testing.T, raw *redis.Client, name string) int {
	t.Helper()
	list, err := raw.ClientList(context.Background()).Result()
	must(t, err, "CLIENT LIST")
	n := 0
	for line := range strings.SplitSeq(list, "\n") {
		f := map[string]string{}
		for kv := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if f["name"] == name && strings.Contains(f["flags"], "b") {
			n++
		}
	}
	return n
}

// openNamed opens a store whose connections carry the client name name.
func openNamed(t *testing.T, prefix, name string) *Store {
	t.Helper()
	u, err := url.Parse(redistest.URL())
	must(t, err, "HERD_REDIS_URL")
	q := u.Query()
	q.Set("client_name", name)
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Open(ctx, u.String(), WithPrefix(prefix))
	must(t, err, "Open")
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// groupAtRest opens a store named by a fresh prefix, with a group "g" of
// one session, and returns the group's version: a reader from it waits.
func groupAtRest(t *testing.T) (s *Store, raw *redis.Client, prefix string, at store.Version) {
	t.Helper()
	raw = redistest.Need(t)
	prefix = testPrefix(t, raw)
	s = openNamed(t, prefix, prefix)
	ctx := ctxT(t)
	_, err := s.OpenSession(ctx, "g", "m", 1, time.Minute)
	must(t, err, "OpenSession")
	snap, err := s.Snapshot(ctx, "g")
	must(t, err, "Snapshot")
	return s, raw, prefix, snap.Version
}

// A Changes call waiting on an idle log whose context is cancelled ends
// its XREAD before it returns: the server lists no blocked client of the
// store, and every connection of the pool is idle again. Before, the call
// returned at once and its XREAD held a connection until its block ended
// (2 minutes), which is why waits were not longer.
func TestChangesCancelEndsWait(t *testing.T) {
	raw := redistest.Need(t)
	prefix := testPrefix(t, raw)
	s := openNamed(t, prefix, prefix)
	testCancelEndsWait(t, s, func() int { return blockedClients(t, raw, prefix) })
}

// The same on a Redis Cluster: the wait runs on the node serving the
// log's slot, and the unblock goes there.
func TestClusterChangesCancelEndsWait(t *testing.T) {
	redistest.Need(t)
	c := redistest.StartCluster(t)
	name := "herdtest-" + redistest.RandomHex(6)
	s := openURL(t, c.URL()+"?prefix=herdtest&client_name="+name)
	testCancelEndsWait(t, s, func() int {
		n := 0
		for _, nd := range c.Nodes {
			rc := redis.NewClient(&redis.Options{Addr: nd.Addr(), MaxRetries: -1})
			n += blockedClients(t, rc, name)
			_ = rc.Close()
		}
		return n
	})
}

// testCancelEndsWait cancels 20 waits of s, blocked says how many clients
// of s the servers list blocked. Half the calls are cancelled as soon as
// they start (before or while the XREAD is sent: the unblock is sent
// again until it takes); the others once the server lists them blocked.
func testCancelEndsWait(t *testing.T, s *Store, blocked func() int) {
	ctx := ctxT(t)
	_, err := s.OpenSession(ctx, "g", "m", 1, time.Minute)
	must(t, err, "OpenSession")
	snap, err := s.Snapshot(ctx, "g")
	must(t, err, "Snapshot")
	for i := range 20 {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, _, err := s.Changes(cctx, "g", snap.Version, 10)
			done <- err
		}()
		if i%2 == 0 {
			waitForCond(t, 5*time.Second, "the wait blocked on the server", func() bool { return blocked() == 1 })
		}
		cancel()
		select {
		case err := <-done:
			wantIs(t, err, context.Canceled, "Changes cancelled")
			wantIs(t, err, store.ErrUnavailable, "Changes cancelled")
		case <-time.After(2 * unblockBound):
			t.Fatalf("call %d: Changes has not returned %v after its cancel", i, 2*unblockBound)
		}
		if i%2 == 0 {
			if n := blocked(); n != 0 {
				t.Fatalf("call %d: Changes returned after its cancel, and the server lists %d blocked clients of the store", i, n)
			}
			if st := s.client.PoolStats(); st.IdleConns != st.TotalConns {
				t.Fatalf("call %d: Changes returned after its cancel, and %d of the pool's %d connections are in use", i, st.TotalConns-st.IdleConns, st.TotalConns)
			}
		}
		// A call cancelled at once may leave its check script's reply
		// to come (evalRaw); the XREAD is never left blocked.
		waitForCond(t, 2*time.Second, "every connection idle, none blocked", func() bool {
			st := s.client.PoolStats()
			return st.IdleConns == st.TotalConns && blocked() == 0
		})
	}
	if got := s.unblock.Load(); got != unblockAllowed {
		t.Fatalf("the default user may unblock: state %d, want %d", got, unblockAllowed)
	}
}

// A call at rest whose context has a deadline returns at it with no
// entries and no error, its connection idle: the wait on a connection of
// its own keeps Changes' contract.
func TestChangesWaitEndsAtDeadline(t *testing.T) {
	s, raw, prefix, at := groupAtRest(t)
	ctx := ctxT(t)
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	cs, v, err := s.Changes(dctx, "g", at, 10)
	if err != nil || len(cs) != 0 || v != at {
		t.Fatalf("Changes at rest until its deadline: %v, %v, %v; want nothing, the same version, no error", cs, v, err)
	}
	if st := s.client.PoolStats(); st.IdleConns != st.TotalConns || blockedClients(t, raw, prefix) != 0 {
		t.Fatalf("after a wait that ended at its deadline: %d of %d connections idle, %d blocked", st.IdleConns, st.TotalConns, blockedClients(t, raw, prefix))
	}
}

// A user with docs/security.md's rule (no CLIENT ID, no CLIENT UNBLOCK)
// waits on the pool, as before: its first wait learns that the server
// refuses the unblock, and every call answers as Changes should.
func TestChangesWaitWithoutUnblock(t *testing.T) {
	raw := redistest.Need(t)
	u := redistest.URL()
	if !strings.HasPrefix(u, "redis://") || strings.Contains(u, "@") {
		t.Skip("needs a plain redis:// test URL without credentials")
	}
	prefix := testPrefix(t, raw)
	ctx := ctxT(t)
	user, pass := "herdtest-nounblock-"+redistest.RandomHex(4), redistest.RandomHex(8)
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + pass, "~" + prefix + ":*", "resetchannels", "+select"}
	for _, c := range strings.Fields(aclCommands) {
		args = append(args, c)
	}
	must(t, raw.Do(ctx, args...).Err(), "ACL SETUSER")
	t.Cleanup(func() { raw.Do(context.Background(), "ACL", "DELUSER", user) })
	s, err := Open(ctx, "redis://"+user+":"+pass+"@"+strings.TrimPrefix(u, "redis://"), WithPrefix(prefix))
	must(t, err, "Open as the documented ACL user")
	defer s.Close()
	// A refusal that answers late leaves the XREAD less time before the
	// deadline: its block is reckoned when it is sent.
	s.client.AddHook(slowClientID{150 * time.Millisecond})
	_, err = s.OpenSession(ctx, "g", "m", 1, time.Minute)
	must(t, err, "OpenSession")
	snap, err := s.Snapshot(ctx, "g")
	must(t, err, "Snapshot")
	for range 2 {
		dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		cs, v, err := s.Changes(dctx, "g", snap.Version, 10)
		cancel()
		if err != nil || len(cs) != 0 || v != snap.Version {
			t.Fatalf("Changes at rest without CLIENT UNBLOCK: %v, %v, %v; want nothing, the same version, no error", cs, v, err)
		}
	}
	if got := s.unblock.Load(); got != unblockDenied {
		t.Fatalf("unblock state %d after waits the server does not let the user unblock; want %d", got, unblockDenied)
	}
}

// Close of a store Open made ends a wait under way: the call returns an
// unavailable store, and Close has waited for the wait's goroutine.
func TestCloseEndsWait(t *testing.T) {
	s, raw, prefix, at := groupAtRest(t)
	ctx := ctxT(t)
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Changes(ctx, "g", at, 10)
		done <- err
	}()
	waitForCond(t, 5*time.Second, "the wait blocked on the server", func() bool { return blockedClients(t, raw, prefix) == 1 })
	must(t, s.Close(), "Close")
	select {
	case err := <-done:
		wantIs(t, err, store.ErrUnavailable, "Changes waiting when the store closed")
	case <-time.After(5 * time.Second):
		t.Fatal("Changes has not returned 5 s after Close")
	}
	waitForCond(t, 5*time.Second, "no blocked client left", func() bool { return blockedClients(t, raw, prefix) == 0 })
}

// slowClientID delays every CLIENT ID by d: a server slow to answer the
// wait's first round trip.
type slowClientID struct{ d time.Duration }

func (h slowClientID) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowClientID) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "client") && len(cmd.Args()) > 1 && strings.EqualFold(fmt.Sprint(cmd.Args()[1]), "id") {
			time.Sleep(h.d)
		}
		return next(ctx, cmd)
	}
}
func (h slowClientID) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A wait whose CLIENT ID answers late still ends before its caller's
// deadline, with nothing and no error: the XREAD's block is reckoned when
// it is sent, not before the round trip.
func TestChangesWaitAfterSlowClientID(t *testing.T) {
	s, _, _, at := groupAtRest(t)
	s.client.AddHook(slowClientID{150 * time.Millisecond})
	for range 2 {
		dctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
		cs, v, err := s.Changes(dctx, "g", at, 10)
		cancel()
		if err != nil || len(cs) != 0 || v != at {
			t.Fatalf("Changes at rest after a slow CLIENT ID: %v, %v, %v; want nothing, the same version, no error", cs, v, err)
		}
	}
}
