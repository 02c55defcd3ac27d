package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/store"
)

// clusterRun is what the workers of TestLeaderKilled acknowledged.
type clusterRun struct {
	mu     sync.Mutex
	claims map[string][]uint64 // partition -> epochs of acknowledged claims
	cps    map[string]uint64   // partition -> last acknowledged checkpoint
	tried  map[string]uint64   // partition -> last checkpoint sent (its reply may be lost)
	oks    []time.Time         // when each acknowledged write returned
	lost   []string            // sessions the store said expired
}

func (r *clusterRun) ok() {
	r.mu.Lock()
	r.oks = append(r.oks, time.Now())
	r.mu.Unlock()
}

// waitOKs waits until n more writes were acknowledged.
func (r *clusterRun) waitOKs(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	r.mu.Lock()
	want := len(r.oks) + n
	r.mu.Unlock()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		r.mu.Lock()
		got := len(r.oks)
		r.mu.Unlock()
		if got >= want {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for %d acknowledged writes (%d so far): %v", n, got-want+n, ctx.Err())
		}
	}
}

// again runs call until it returns anything but ErrUnavailable (a leader
// change under way): the reply of a call that failed may be lost, so
// what it does must be safe to do twice.
func again(ctx context.Context, call func() error) error {
	for {
		err := call()
		if !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TestLeaderKilled: on a three-node cluster, four members claim, checkpoint
// and release while the leader is killed. No acknowledged claim is missing
// from the log, epochs grow with every claim of a partition, each
// partition's stored checkpoint is the last one acknowledged (or one sent
// after it whose reply was lost when the workers stopped), no session
// is lost, and the members' writes go on within TTL + 1 s of the kill.
func TestLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node etcd cluster; skipped with -short")
	}
	nodes := etcdtest.Cluster(t, 3)
	u := etcdtest.URL(nodes)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	open := func() *Store {
		s, err := Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	const group, ttl, parts, workers = "leader", 2 * time.Second, 16, 4
	admin := open()
	var ps []store.Partition
	for i := range parts {
		ps = append(ps, store.Partition{ID: fmt.Sprintf("p%d", i)})
	}
	if _, err := admin.SetPartitions(ctx, group, store.PartitionSet{Partitions: ps}); err != nil {
		t.Fatal(err)
	}
	start, err := admin.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	run := &clusterRun{claims: map[string][]uint64{}, cps: map[string]uint64{}, tried: map[string]uint64{}}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range workers {
		st := open()
		wg.Go(func() { clusterWorker(wctx, t, st, group, fmt.Sprintf("m%d", w), ttl, parts, run) })
	}
	run.waitOKs(t, ctx, 100) // the workers at work before the kill
	killed := leaderOf(t, ctx, admin.c, nodes)
	killedAt := time.Now()
	killed.Kill()
	t.Logf("killed the leader %s", killed.Name)
	run.waitOKs(t, ctx, 300) // and after it
	stop()
	wg.Wait()
	checkClusterRun(t, ctx, admin, group, start, run, killedAt, ttl)
}

// leaderOf returns the node that leads the cluster.
func leaderOf(t *testing.T, ctx context.Context, c *clientv3.Client, nodes []*etcdtest.Node) *etcdtest.Node {
	t.Helper()
	for _, n := range nodes {
		st, err := c.Status(ctx, "http://"+n.Addr())
		if err == nil && st.Leader == st.Header.MemberId {
			return n
		}
	}
	t.Fatal("no node says it leads the cluster")
	return nil
}

// clusterWorker is one member: a session kept alive every TTL/4, and a
// loop that claims a random partition, checkpoints it three times and
// releases it.
func clusterWorker(ctx context.Context, t *testing.T, st *Store, group, member string, ttl time.Duration, parts int, run *clusterRun) {
	var sess string
	if err := again(ctx, func() (err error) { sess, err = st.OpenSession(ctx, group, member, 1, ttl); return err }); err != nil {
		t.Errorf("%s: OpenSession: %v", member, err)
		return
	}
	go func() {
		for ctx.Err() == nil {
			_, err := st.KeepAlive(ctx, group, sess, ttl)
			if errors.Is(err, store.ErrSessionExpired) {
				run.mu.Lock()
				run.lost = append(run.lost, sess)
				run.mu.Unlock()
				return
			}
			select {
			case <-time.After(ttl / 4):
			case <-ctx.Done():
			}
		}
	}()
	for ctx.Err() == nil {
		p := fmt.Sprintf("p%d", rand.IntN(parts))
		var o store.Ownership
		err := again(ctx, func() (err error) { o, err = store.Claim(ctx, st, group, p, sess); return err })
		if err != nil {
			continue // claimed by another, or the end
		}
		run.mu.Lock()
		run.claims[p] = append(run.claims[p], o.Epoch)
		next := run.cps[p] + 1
		run.mu.Unlock()
		run.ok()
		for range 3 {
			v := []byte(fmt.Sprint(next))
			run.mu.Lock()
			run.tried[p] = next
			run.mu.Unlock()
			if err := again(ctx, func() error { return st.Checkpoint(ctx, group, p, o.Epoch, v) }); err != nil {
				break
			}
			run.mu.Lock()
			run.cps[p] = next
			run.mu.Unlock()
			run.ok()
			next++
		}
		if again(ctx, func() error { return store.Release(ctx, st, group, p, sess, o.Epoch) }) == nil {
			run.ok()
		}
	}
}

// checkClusterRun checks the log and the records against what the workers
// were acknowledged.
func checkClusterRun(t *testing.T, ctx context.Context, st *Store, group string, start *store.Snapshot, run *clusterRun, killedAt time.Time, ttl time.Duration) {
	t.Helper()
	end, err := st.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string][]uint64{}
	r := start.Clone()
	for v := start.Version; v.Seq < end.Version.Seq; {
		cs, next, err := st.Changes(ctx, group, v, 500)
		if err != nil {
			t.Fatalf("Changes(after %v): %v", v, err)
		}
		for _, c := range cs {
			if c.Kind == store.Claimed {
				logged[c.Partition] = append(logged[c.Partition], c.Epoch)
			}
		}
		// A write whose call was cancelled as the workers stopped may
		// commit after the last snapshot: the replica stops at its version.
		if i := slices.IndexFunc(cs, func(c store.Change) bool { return c.Version.Seq > end.Version.Seq }); i >= 0 {
			cs, next = cs[:i], end.Version
		}
		if err := r.ApplyAll(cs); err != nil {
			t.Fatalf("the log does not apply to the snapshot it follows: %v", err)
		}
		v = next
	}
	same := func(a, b store.Ownership) bool {
		return a.Partition == b.Partition && a.Session == b.Session && a.Epoch == b.Epoch && a.GivenBack == b.GivenBack
	}
	if r.Version != end.Version || !slices.EqualFunc(r.Owners, end.Owners, same) {
		var diff []string
		for i := range max(len(r.Owners), len(end.Owners)) {
			var a, b store.Ownership
			if i < len(r.Owners) {
				a = r.Owners[i]
			}
			if i < len(end.Owners) {
				b = end.Owners[i]
			}
			if !same(a, b) {
				diff = append(diff, fmt.Sprintf("replica %+v, snapshot %+v", a, b))
			}
		}
		t.Fatalf("the replica (version %v) differs from the last snapshot (version %v): %d owners differ: %v", r.Version, end.Version, len(diff), diff)
	}
	n := 0
	for p, acked := range run.claims {
		n += len(acked)
		if !slices.IsSorted(logged[p]) || len(slices.Compact(slices.Clone(logged[p]))) != len(logged[p]) {
			t.Errorf("%s: logged epochs %v; want strictly increasing", p, logged[p])
		}
		for _, e := range acked {
			if !slices.Contains(logged[p], e) {
				t.Errorf("%s: the claim acknowledged at epoch %d is not in the log", p, e)
			}
		}
	}
	for p, want := range run.cps {
		rs, err := st.Records(ctx, group, []string{p})
		var got uint64
		if err == nil && len(rs) == 1 {
			_, err = fmt.Sscan(string(rs[0].Checkpoint), &got)
		}
		if err != nil || got < want || got > run.tried[p] {
			t.Errorf("%s: record %+v, %v; want the last acknowledged checkpoint %d, or one sent after it (up to %d)", p, rs, err, want, run.tried[p])
		}
	}
	if len(run.lost) > 0 {
		t.Errorf("sessions lost: %v; want none (a new leader extends every lease)", run.lost)
	}
	var gap time.Duration
	prev := killedAt
	slices.SortFunc(run.oks, time.Time.Compare)
	for _, at := range run.oks {
		if at.After(killedAt) {
			gap, prev = max(gap, at.Sub(prev)), at
		}
	}
	t.Logf("%d claims acknowledged; the longest pause of the members' writes after the kill: %v", n, gap.Round(time.Millisecond))
	if gap > ttl+time.Second || n == 0 {
		t.Errorf("the members' writes paused %v after the kill; want at most TTL + 1 s = %v", gap, ttl+time.Second)
	}
}
