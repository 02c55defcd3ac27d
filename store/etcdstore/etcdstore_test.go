package etcdstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// testPrefix returns a key prefix no other test or run uses, and deletes
// every key under it (and revokes nothing: sessions end with their TTL)
// when t ends.
func testPrefix(t testing.TB, c *clientv3.Client) string {
	t.Helper()
	p := fmt.Sprintf("herdtest/%016x/", rand.Uint64())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Delete(ctx, p, clientv3.WithPrefix()); err != nil {
			t.Errorf("deleting the test's keys under %q: %v", p, err)
		}
	})
	return p
}

// openTest opens a store on the test server with a fresh prefix.
func openTest(t testing.TB, opts ...Option) (*Store, string) {
	t.Helper()
	u := etcdtest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatalf("Open(%s): %v", u, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	p := testPrefix(t, s.c)
	s.prefix = p
	for _, o := range opts {
		o(s)
	}
	return s, p
}

func TestConformance(t *testing.T) {
	base, prefix := openTest(t)
	// A lease of the suite's 500 ms TTL is granted for 1 s, and ended on
	// the lessor's next 500 ms tick.
	storetest.RunWith(t, storetest.Options{ExpiryLag: time.Second}, func(t *testing.T) store.Store {
		return New(base.c, WithPrefix(prefix))
	})
}

func TestTrim(t *testing.T) {
	s, _ := openTest(t, WithLogLimit(10))
	storetest.RunTrim(t, s, 10)
}

// TestLargeSetAndBatch: a 100,000-id partition set (about 2 MB, over
// etcd's 1.5 MiB request limit) is stored in chunks and read back whole,
// by Snapshot and by a reader of the log; a batch of store.MaxBatch claims
// (more than etcd's 128 operations of a transaction) is split and logged
// without a gap.
func TestLargeSetAndBatch(t *testing.T) {
	s, _ := openTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const group = "large"
	ps := make([]store.Partition, 100_000)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprintf("partition-%06d", i), Weight: i % 3}
	}
	res, err := s.SetPartitions(ctx, group, store.PartitionSet{Partitions: ps, Kind: store.KindPartitions})
	if err != nil || !res.Written {
		t.Fatalf("SetPartitions of 100,000 ids: %+v, %v; want it written", res, err)
	}
	snap, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Partitions) != len(ps) || snap.Partitions[12345] != ps[12345] || snap.Kind != store.KindPartitions {
		t.Fatalf("Snapshot has %d partitions (kind %q); want the %d stored", len(snap.Partitions), snap.Kind, len(ps))
	}
	cs, _, err := s.Changes(ctx, group, store.Version{}, 10)
	if err == nil {
		t.Fatalf("Changes from the zero version of a written group: %d entries; want ErrVersionGone", len(cs))
	}
	sess, err := s.OpenSession(ctx, group, "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, store.MaxBatch)
	for i := range ids {
		ids[i] = ps[i].ID
	}
	rs, err := s.ClaimBatch(ctx, group, sess, ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Err != nil || r.Ownership.Session != sess {
			t.Fatalf("claim %d of the batch: %+v; want it claimed", i, r)
		}
	}
	after, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	// The log from the first snapshot: the session and the claims.
	r := snap.Clone()
	for v := snap.Version; v.Seq < after.Version.Seq; {
		cs, next, err := s.Changes(ctx, group, v, 300)
		if err != nil {
			t.Fatalf("Changes(after %v): %v", v, err)
		}
		if err := r.ApplyAll(cs); err != nil {
			t.Fatal(err)
		}
		v = next
	}
	if r.Version != after.Version || len(r.Owners) != len(after.Owners) || len(after.Owners) != store.MaxBatch {
		t.Fatalf("replica at %v with %d records; want %v with %d", r.Version, len(r.Owners), after.Version, store.MaxBatch)
	}
	if err := s.DeleteGroup(ctx, group, true); err != nil {
		t.Fatal(err)
	}
}
