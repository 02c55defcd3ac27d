package memstore_test

// Snapshots shared and modelled, Close, benchmarks, and the log's wake-ups and limits.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// TestSnapshotShared: unchanged snapshots share their lists; a change
// produces a new list and leaves the old snapshot as it was. A checkpoint is
// no change to a snapshot, which carries none.
func TestSnapshotShared(t *testing.T) {
	ctx := t.Context()
	s := memstore.New()
	a := mustOpen(t, s, "g", "a", time.Minute)
	var epochs []uint64
	for i := range 100 {
		o, err := store.Claim(ctx, s, "g", fmt.Sprintf("p%03d", i), a)
		if err != nil {
			t.Fatal(err)
		}
		epochs = append(epochs, o.Epoch)
	}
	s1, s2 := mustSnap(t, s, "g"), mustSnap(t, s, "g")
	if &s1.Owners[0] != &s2.Owners[0] {
		t.Fatal("two snapshots without a change in between do not share Owners")
	}
	if err := s.Checkpoint(ctx, "g", "p050", epochs[50], []byte("new")); err != nil {
		t.Fatal(err)
	}
	s3 := mustSnap(t, s, "g")
	if &s3.Owners[0] != &s1.Owners[0] || s3.Owners[50].Checkpoint != nil {
		t.Fatalf("after a Checkpoint the snapshot shows checkpoint %q or a new list; want the same list, without checkpoints", s3.Owners[50].Checkpoint)
	}
	if err := store.Release(ctx, s, "g", "p050", a, epochs[50]); err != nil {
		t.Fatal(err)
	}
	s4 := mustSnap(t, s, "g")
	if s1.Owners[50].Session != a {
		t.Fatalf("an earlier snapshot changed to %+v; want it unchanged", s1.Owners[50])
	}
	if s4.Owners[50].Session != "" {
		t.Fatalf("new snapshot has %+v; want p050 released", s4.Owners[50])
	}
}

// TestSnapshotModel applies random operations and compares every snapshot
// with a plain model, to check the incremental sorted list and view.
func TestSnapshotModel(t *testing.T) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	s := memstore.New()
	sessions := []string{mustOpen(t, s, "g", "a", time.Hour), mustOpen(t, s, "g", "b", time.Hour)}
	model := map[string]store.Ownership{}
	for step := range 3000 {
		p := fmt.Sprintf("p%d", rng.IntN(400))
		sess := sessions[rng.IntN(len(sessions))]
		switch rng.IntN(3) {
		case 0:
			o, err := store.Claim(ctx, s, "g", p, sess)
			if err == nil {
				o.Checkpoint = nil // snapshots carry none
				model[p] = o
			} else if !errors.Is(err, store.ErrClaimed) {
				t.Fatal(err)
			}
		case 1:
			if o, ok := model[p]; ok && o.Session != "" {
				v := fmt.Appendf(nil, "v%d", step)
				if err := s.Checkpoint(ctx, "g", p, o.Epoch, v); err != nil {
					t.Fatal(err)
				}
				model[p] = o
			}
		case 2:
			if o, ok := model[p]; ok && o.Session != "" {
				if err := store.Release(ctx, s, "g", p, o.Session, o.Epoch); err != nil {
					t.Fatal(err)
				}
				o.Session, o.Member = "", ""
				model[p] = o
			}
		}
		if rng.IntN(10) != 0 {
			continue
		}
		snap := mustSnap(t, s, "g")
		keys := make([]string, 0, len(model))
		for k := range model {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if len(snap.Owners) != len(keys) {
			t.Fatalf("step %d: %d records; want %d", step, len(snap.Owners), len(keys))
		}
		for i, k := range keys {
			got, want := snap.Owners[i], model[k]
			if got.Partition != want.Partition || got.Session != want.Session || got.Member != want.Member ||
				got.Epoch != want.Epoch || string(got.Checkpoint) != string(want.Checkpoint) {
				t.Fatalf("step %d: record %d = %+v; want %+v", step, i, got, want)
			}
		}
	}
}

// TestClose: later calls fail with ErrUnavailable.
func TestClose(t *testing.T) {
	ctx := t.Context()
	s := memstore.New()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(ctx, "g"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Snapshot after Close: %v; want ErrUnavailable", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// benchStore returns a store with 100,000 partitions owned by 1,000
// sessions, as in the simulation.
func benchStore(b *testing.B) (*memstore.Store, []store.Ownership) {
	ctx := b.Context()
	s := memstore.New()
	const nPartitions, nSessions = 100_000, 1_000
	ps := make([]store.Partition, nPartitions)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprintf("partition-%06d", i)}
	}
	if _, err := s.SetPartitions(ctx, "g", store.PartitionSet{Partitions: ps}); err != nil {
		b.Fatal(err)
	}
	sessions := make([]string, nSessions)
	for i := range sessions {
		id, err := s.OpenSession(ctx, "g", fmt.Sprintf("member-%04d", i), 1, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		sessions[i] = id
	}
	owners := make([]store.Ownership, nPartitions)
	for i, j := range rand.Perm(nPartitions) {
		o, err := store.Claim(ctx, s, "g", ps[j].ID, sessions[i%nSessions])
		if err != nil {
			b.Fatal(err)
		}
		owners[j] = o
	}
	return s, owners
}

// BenchmarkSnapshot100k reads a snapshot of 100,000 owned partitions and
// 1,000 sessions with nothing changed in between (the common case).
func BenchmarkSnapshot100k(b *testing.B) {
	s, _ := benchStore(b)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		snap, err := s.Snapshot(ctx, "g")
		if err != nil || len(snap.Owners) != 100_000 {
			b.Fatal(err, len(snap.Owners))
		}
	}
}

// BenchmarkSnapshot100kAfterCheckpoint reads a snapshot after every
// checkpoint (worst case: the ownership list is patched every time).
func BenchmarkSnapshot100kAfterCheckpoint(b *testing.B) {
	s, owners := benchStore(b)
	ctx := b.Context()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		o := owners[i%len(owners)]
		if err := s.Checkpoint(ctx, "g", o.Partition, o.Epoch, []byte("offset")); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Snapshot(ctx, "g"); err != nil {
			b.Fatal(err)
		}
		i += 7919
	}
}

func keepErr(_ time.Duration, err error) error { return err }

// A reader blocked in Changes wakes when the group is deleted and finds its
// version gone; one blocked when the store closes gets an error.
func TestChangesWokenByDeleteAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		ctx := t.Context()
		if _, err := s.OpenSession(ctx, "g", "m", 1, time.Minute); err != nil {
			t.Fatal(err)
		}
		snap, _ := s.Snapshot(ctx, "g")
		errs := make(chan error, 2)
		go func() {
			_, _, err := s.Changes(ctx, "g", snap.Version, 10)
			errs <- err
		}()
		synctest.Wait() // blocked in Changes
		if err := s.DeleteGroup(ctx, "g", true); err != nil {
			t.Fatal(err)
		}
		if err := <-errs; !errors.Is(err, store.ErrVersionGone) {
			t.Fatalf("Changes blocked while the group was deleted: %v; want ErrVersionGone", err)
		}
		go func() {
			_, _, err := s.Changes(ctx, "g", store.Version{}, 10)
			errs <- err
		}()
		synctest.Wait()
		s.Close()
		if err := <-errs; !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Changes blocked while the store closed: %v; want ErrUnavailable", err)
		}
	})
}

// The log keeps at least WithLogLimit entries and trims the rest, and a
// session expired by the store's clock is logged by the first call after.
func TestLogLimitAndLazyExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.WithLogLimit(5))
		defer s.Close()
		ctx := t.Context()
		a, _ := s.OpenSession(ctx, "g", "a", 1, time.Second)
		snap, _ := s.Snapshot(ctx, "g")
		time.Sleep(2 * time.Second) // virtual time: a's TTL passes
		if _, err := s.Snapshot(ctx, "other"); err != nil {
			t.Fatal(err)
		}
		cs, v, err := s.Changes(ctx, "g", snap.Version, 10)
		if err != nil || len(cs) != 1 || cs[0].Kind != store.SessionExpired || cs[0].Session != a {
			t.Fatalf("Changes after a's TTL and a call on another group: %+v, %v; want a's SessionExpired", cs, err)
		}
		for range 20 {
			if _, err := s.OpenSession(ctx, "g", "b", 1, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := s.Changes(ctx, "g", v, 10); !errors.Is(err, store.ErrVersionGone) {
			t.Fatalf("Changes 20 entries behind a log of 5: %v; want ErrVersionGone", err)
		}
		end, _ := s.Snapshot(ctx, "g")
		back := store.Version{Seq: end.Version.Seq - 5, Tag: end.Version.Tag}
		if cs, _, err := s.Changes(ctx, "g", back, 10); err != nil || len(cs) != 5 {
			t.Fatalf("Changes 5 entries behind a log of 5: %d entries, %v; want 5", len(cs), err)
		}
	})
}
