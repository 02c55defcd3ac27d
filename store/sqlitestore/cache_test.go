package sqlitestore_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// The records a Store keeps of a group and updates from the log (cache.go)
// equal a full read, after random changes made through it and through
// another Store on the file, group deletions included.
func TestCachedRecordsEqualFullRead(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	a := open(t, path)
	b := open(t, path)
	rng := rand.New(rand.NewPCG(3, 4))
	stores := []store.Store{a, b}
	sessions := map[store.Store]string{}
	openAll := func() {
		for _, s := range stores {
			id, err := s.OpenSession(ctx, "g", "m", 1, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			sessions[s] = id
		}
	}
	openAll()
	for step := range 400 {
		s := stores[rng.IntN(2)]
		p := fmt.Sprintf("p%d", rng.IntN(30))
		switch op := rng.IntN(20); {
		case op < 9:
			_, _ = store.Claim(ctx, s, "g", p, sessions[s])
		case op < 12:
			for _, o := range mustSnap(t, s, "g").Owners {
				if o.Session == sessions[s] && rng.IntN(2) == 0 {
					_ = store.Release(ctx, s, "g", o.Partition, o.Session, o.Epoch)
				}
			}
		case op < 13:
			_ = s.Restore(ctx, "g", p, uint64(1+rng.IntN(1000)), nil)
		case op < 15:
			var set []store.Partition
			for i := range rng.IntN(40) {
				set = append(set, store.Partition{ID: fmt.Sprintf("p%d", i), Weight: rng.IntN(3)})
			}
			if _, err := s.SetPartitions(ctx, "g", store.PartitionSet{Partitions: set}); err != nil {
				t.Fatal(err)
			}
		case op < 16:
			if _, err := s.ClaimBatch(ctx, "g", sessions[s], []string{p, p + "x"}); err != nil {
				t.Fatal(err)
			}
		case op < 17 && step%50 == 0:
			if err := s.DeleteGroup(ctx, "g", true); err != nil {
				t.Fatal(err)
			}
			openAll()
		}
		// a's and b's snapshots (often from their caches) against a full
		// read by a Store that never read the group.
		fresh := open(t, path)
		want := mustSnap(t, fresh, "g")
		fresh.Close()
		for i, s := range stores {
			got := mustSnap(t, s, "g")
			if got.Version != want.Version || got.PartitionSetStored != want.PartitionSetStored ||
				!slices.Equal(got.Partitions, want.Partitions) || !slices.EqualFunc(got.Owners, want.Owners, func(x, y store.Ownership) bool {
				return x.Partition == y.Partition && x.Session == y.Session && x.Member == y.Member && x.Epoch == y.Epoch && x.GivenBack == y.GivenBack
			}) {
				t.Fatalf("step %d: store %d's snapshot at %v differs from a full read at %v:\n%+v\n%+v", step, i, got.Version, want.Version, got, want)
			}
		}
	}
	if a.Applied() < 100 || b.Applied() < 100 {
		t.Errorf("snapshots made from the kept records: %d and %d of 400 each; want most", a.Applied(), b.Applied())
	}
	t.Logf("snapshots made from the kept records: %d and %d", a.Applied(), b.Applied())
}
