package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

// Tests of the deployments: a Redis Cluster of three primaries and a
// primary with a replica behind three sentinels, each started by the test
// on free loopback ports (see internal/redistest).

func openURL(t *testing.T, u string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatalf("Open(%s): %v", u, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func wantInvalid(t *testing.T, u, mention string) {
	t.Helper()
	s, err := Open(ctxT(t), u)
	if err == nil {
		_ = s.Close()
		t.Fatalf("Open(%s) succeeded; want ErrInvalid", u)
	}
	wantIs(t, err, store.ErrInvalid, "Open("+u+")")
	if !strings.Contains(err.Error(), mention) {
		t.Fatalf("Open(%s): %v; want a message mentioning %q", u, err, mention)
	}
}

// TestCluster runs the conformance suite on a 3-primary Redis Cluster, then
// the misuse checks on the same cluster (they end by killing a node).
func TestCluster(t *testing.T) {
	redistest.Need(t)
	c := redistest.StartCluster(t)
	u := c.URL() + "?prefix=herdtest"
	storetest.Run(t, func(t *testing.T) store.Store { return openURL(t, u) })
	t.Run("misuse", func(t *testing.T) { testClusterMisuse(t, c) })
}

// testClusterMisuse: a plain URL or client on a cluster node, and a cluster
// URL on a plain server, are told what to use instead; a cluster that is
// down says so.
func testClusterMisuse(t *testing.T, c *redistest.Cluster) {
	wantInvalid(t, "redis://"+c.Nodes[0].Addr(), "redis+cluster://")

	// A plain client given to New: the groups whose slot another node
	// serves get MOVED, reported as a configuration error.
	raw := redis.NewClient(&redis.Options{Addr: c.Nodes[0].Addr()})
	defer raw.Close()
	s := New(raw)
	ctx := ctxT(t)
	moved := 0
	for i := range 20 {
		_, err := s.OpenSession(ctx, fmt.Sprint("group", i), "m", 1, time.Minute)
		if err == nil {
			continue
		}
		wantIs(t, err, store.ErrInvalid, "OpenSession through a plain client on a cluster node")
		if !strings.Contains(err.Error(), "redis+cluster://") {
			t.Fatalf("error %q does not name redis+cluster://", err)
		}
		moved++
	}
	if moved == 0 {
		t.Fatal("no group of 20 hashed to another node's slots")
	}

	plain := redistest.StartServer(t)
	wantInvalid(t, "redis+cluster://"+plain.Addr(), "not a Redis Cluster node")
	wantInvalid(t, "redis+cluster://"+c.Nodes[0].Addr()+"/1", "only database 0")

	// A primary without a replica dies: once the others mark it failed
	// (cluster-node-timeout 2 s), calls get CLUSTERDOWN, reported as an
	// unavailable store that says why.
	cs := openURL(t, c.URL()+"?prefix=herdtest&dial_timeout=500ms")
	c.Nodes[2].Kill()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		// Groups whose slot a live node serves get CLUSTERDOWN; the dead
		// node's get connection refused.
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cs.OpenSession(cctx, fmt.Sprint("group", i%10), "m", 1, time.Minute)
		cancel()
		if err != nil && strings.Contains(err.Error(), "Redis Cluster is down") {
			wantIs(t, err, store.ErrUnavailable, "OpenSession on a cluster that is down")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CLUSTERDOWN error 20 s after a primary died; last error: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling until the cluster marks the node failed
	}
}

// TestSentinel runs the conformance suite on a primary, a replica and three
// sentinels, then the misuse checks on the same set.
func TestSentinel(t *testing.T) {
	redistest.Need(t)
	ss := redistest.StartSentinels(t)
	u := ss.URL() + "?prefix=herdtest"
	storetest.Run(t, func(t *testing.T) store.Store { return openURL(t, u) })
	t.Run("misuse", func(t *testing.T) { testSentinelMisuse(t, ss) })
	t.Run("waits stay on the pool", func(t *testing.T) {
		// A CLIENT UNBLOCK after a failover could end another client's
		// command on the new primary: Sentinel waits are not unblocked.
		if s := openURL(t, u); s.waitNode(ctxT(t), "k") != nil {
			t.Fatal("a Sentinel store runs its waits on connections it would unblock by id")
		}
	})
}

// testSentinelMisuse: wrong master names and servers of the wrong kind.
func testSentinelMisuse(t *testing.T, ss *redistest.SentinelSet) {
	wantInvalid(t, "redis+sentinel://"+ss.Sentinels[0].Addr()+"/nosuchmaster", `master named "nosuchmaster"`)
	wantInvalid(t, "redis://"+ss.Sentinels[0].Addr(), "redis+sentinel://")
	wantInvalid(t, "redis://"+ss.Replica.Addr(), "read-only replica")
	wantInvalid(t, "redis+sentinel://"+ss.Primary.Addr()+"/"+ss.Master, "not a Redis Sentinel")
	// A client of the replica given to New: writes are refused (READONLY)
	// with a message saying what to do.
	rep := redis.NewClient(&redis.Options{Addr: ss.Replica.Addr(), MaxRetries: -1})
	defer rep.Close()
	_, err := New(rep, WithPrefix("herdtest")).OpenSession(ctxT(t), "g", "m", 1, time.Minute)
	wantIs(t, err, store.ErrUnavailable, "OpenSession through a client of the replica")
	if !strings.Contains(err.Error(), "read-only replica") {
		t.Fatalf("error %q does not say the server is a read-only replica", err)
	}
	// go-redis' own form works too.
	s := openURL(t, "redis+sentinel://"+ss.Sentinels[0].Addr()+"?master_name="+ss.Master+"&addr="+ss.Sentinels[1].Addr())
	if _, err := s.Snapshot(ctxT(t), "g"); err != nil {
		t.Fatal(err)
	}
}

// TestSentinelFailover kills the primary once the group's state has reached
// the replica (WAIT), lets the sentinels promote the replica, and checks
// that a Store opened by URL keeps working: the session, the ownership and
// its epoch survive, fenced writes with that epoch still succeed, the log
// continues from the version read before, and the next epoch is higher. (Without the WAIT, writes the
// primary acknowledged but had not yet sent are lost; see the package
// documentation.)
func TestSentinelFailover(t *testing.T) {
	redistest.Need(t)
	ss := redistest.StartSentinels(t)
	ctx := ctxT(t)
	s := openURL(t, ss.URL()+"?prefix=herdtest&dial_timeout=1s")
	const g = "failover"
	id, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession")
	o, err := store.Claim(ctx, s, g, "p", id)
	must(t, err, "Claim")
	must(t, s.Checkpoint(ctx, g, "p", o.Epoch, []byte("before")), "Checkpoint")
	before, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")

	primary := redis.NewClient(&redis.Options{Addr: ss.Primary.Addr()})
	n, err := primary.Wait(ctx, 1, 5*time.Second).Result()
	_ = primary.Close()
	if err != nil || n != 1 {
		t.Fatalf("WAIT 1: %d, %v", n, err)
	}
	ss.Primary.Kill()
	start := time.Now()

	// Calls fail (ErrUnavailable) until the sentinels have promoted the
	// replica and the client has followed.
	var kerr error
	deadline := time.Now().Add(20 * time.Second)
	for {
		kctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, kerr = s.KeepAlive(kctx, g, id, time.Minute)
		cancel()
		if kerr == nil || !errors.Is(kerr, store.ErrUnavailable) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling the store during a failover
	}
	must(t, kerr, "KeepAlive after the failover")
	t.Logf("store usable again %v after the primary was killed", time.Since(start).Round(100*time.Millisecond))
	// The only live server is the replica: it must have been promoted.
	// (Sentinels learn of the switch one by one, so asking one of them
	// may still name the old primary.)
	rep := redis.NewClient(&redis.Options{Addr: ss.Replica.Addr()})
	info, err := rep.Info(ctx, "replication").Result()
	_ = rep.Close()
	must(t, err, "INFO replication on the replica")
	if !strings.Contains(info, "role:master") {
		t.Fatalf("the replica was not promoted:\n%s", info)
	}

	snap, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot after the failover")
	if len(snap.Owners) != 1 || snap.Owners[0].Epoch != o.Epoch {
		t.Fatalf("owners after the failover: %+v; want p at epoch %d", snap.Owners, o.Epoch)
	}
	must(t, s.Checkpoint(ctx, g, "p", o.Epoch, []byte("after")), "Checkpoint after the failover")
	must(t, store.Release(ctx, s, g, "p", id, o.Epoch), "Release")
	if cs, _, err := s.Changes(ctx, g, before.Version, 10); err != nil || len(cs) != 1 || cs[0].Kind != store.Released {
		t.Fatalf("the log after the failover, from before it: %+v, %v; want the release", cs, err)
	}
	// Snapshots carry no checkpoints: the next claim returns it.
	o2, err := store.Claim(ctx, s, g, "p", id)
	must(t, err, "Claim after the failover")
	if o2.Epoch <= o.Epoch {
		t.Fatalf("epoch after the failover %d; want > %d", o2.Epoch, o.Epoch)
	}
	if string(o2.Checkpoint) != "after" {
		t.Fatalf("checkpoint after the failover %q; want \"after\" (written at the epoch the failover kept)", o2.Checkpoint)
	}
}
