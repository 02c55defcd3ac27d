package sqlitestore_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
)

// Records returns the records asked for, in that order, with checkpoints
// and the times of the last claim and checkpoint on the store's clock.
func TestRecords(t *testing.T) {
	ctx := t.Context()
	clock := newClock()
	s := open(t, filepath.Join(t.TempDir(), "herd.db"), sqlitestore.WithClock(clock.Now))
	a, _ := s.OpenSession(ctx, "g", "a", 1, time.Hour)
	p, err := store.Claim(ctx, s, "g", "p", a)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := store.Claim(ctx, s, "g", "q", a)
	clock.Add(2 * time.Second)
	if err := s.Checkpoint(ctx, "g", "p", p.Epoch, []byte("pos")); err != nil {
		t.Fatal(err)
	}
	clock.Add(3 * time.Second)
	if err := s.Restore(ctx, "g", "r", 5, nil); err != nil {
		t.Fatal(err)
	}
	v := mustSnap(t, s, "g").Version
	recs, err := s.Records(ctx, "g", []string{"q", "none", "p", "r"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0].Partition != "q" || recs[1].Partition != "p" || recs[2].Partition != "r" {
		t.Fatalf("Records(q, none, p, r) = %+v; want q, p, r in that order", recs)
	}
	if r := recs[1]; r.Session != a || r.Member != "a" || r.Epoch != p.Epoch || string(r.Checkpoint) != "pos" ||
		r.Since != 5*time.Second || r.CheckpointAge != 3*time.Second {
		t.Errorf("record of p: %+v; want a's, checkpoint pos, claimed 5s ago, checkpoint 3s old", r)
	}
	if r := recs[0]; r.Checkpoint != nil || r.CheckpointAge != 0 || r.Since != 5*time.Second || r.Epoch != q.Epoch {
		t.Errorf("record of q (no checkpoint): %+v; want nil checkpoint, age 0, claimed 5s ago", r)
	}
	if r := recs[2]; r.Session != "" || r.Epoch != 5 || r.Since != 0 || r.Checkpoint != nil {
		t.Errorf("record of r (restored without a checkpoint just now): %+v", r)
	}
	if after := mustSnap(t, s, "g").Version; after != v {
		t.Errorf("Records moved the version from %v to %v; want no change", v, after)
	}
	for _, bad := range [][]string{{"x", "x"}, {""}, make([]string, store.MaxBatch+1)} {
		if _, err := s.Records(ctx, "g", bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Records(%q): %v; want ErrInvalid", bad[:min(len(bad), 2)], err)
		}
	}
	if recs, err := s.Records(ctx, "nogroup", []string{"p"}); err != nil || len(recs) != 0 {
		t.Errorf("Records of a group never written: %+v, %v; want none", recs, err)
	}
}

// GiveBack releases like Release and marks the record with the giver; the
// mark stays through other sessions' claims and releases, and goes with
// the giver's own claim. The log carries it, and a replica fed by the log
// equals a later snapshot, mark included.
func TestGiveBack(t *testing.T) {
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "herd.db"))
	a, _ := s.OpenSession(ctx, "g", "a", 1, time.Hour)
	b, _ := s.OpenSession(ctx, "g", "b", 1, time.Hour)
	o, err := store.Claim(ctx, s, "g", "p", a)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(ctx, "g", "p", o.Epoch, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	start := mustSnap(t, s, "g")
	if err := s.GiveBack(ctx, "g", "p", b, o.Epoch); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("GiveBack by another session: %v; want ErrNotOwner", err)
	}
	if err := s.GiveBack(ctx, "g", "p", a, o.Epoch+1); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("GiveBack at a wrong epoch: %v; want ErrNotOwner", err)
	}
	if err := s.GiveBack(ctx, "g", "p", a, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("GiveBack at epoch 0: %v; want ErrInvalid", err)
	}
	if err := s.GiveBack(ctx, "g", "p", a, o.Epoch); err != nil {
		t.Fatal(err)
	}
	cs, _, err := s.Changes(ctx, "g", start.Version, 10)
	if err != nil || len(cs) != 1 || cs[0].Kind != store.Released || cs[0].GivenBack != a || cs[0].Session != a || cs[0].Epoch != o.Epoch {
		t.Fatalf("log after GiveBack: %+v, %v; want one Released entry with GivenBack %q", cs, err, a)
	}
	if r := record(t, s, "p"); r.Session != "" || r.GivenBack != a {
		t.Errorf("record after GiveBack: %+v; want released, given back by a", r)
	}
	ob, err := store.Claim(ctx, s, "g", "p", b)
	if err != nil || ob.GivenBack != a || string(ob.Checkpoint) != "kept" {
		t.Fatalf("Claim by b after a gave p back: %+v, %v; want the mark kept and the checkpoint", ob, err)
	}
	if err := store.Release(ctx, s, "g", "p", b, ob.Epoch); err != nil {
		t.Fatal(err)
	}
	if r := record(t, s, "p"); r.GivenBack != a {
		t.Errorf("record after b's release: %+v; want the mark kept", r)
	}
	if err := s.Restore(ctx, "g", "p", ob.Epoch+10, []byte("restored")); err != nil {
		t.Fatal(err)
	}
	if r := record(t, s, "p"); r.GivenBack != "" {
		t.Errorf("record after Restore: %+v; want the mark cleared (see Ownership.GivenBack)", r)
	}
	oa, err := store.Claim(ctx, s, "g", "p", a)
	if err != nil || oa.GivenBack != "" {
		t.Fatalf("Claim by the giver: %+v, %v; want the mark cleared", oa, err)
	}
	if err := s.GiveBack(ctx, "g", "p", a, oa.Epoch); err != nil {
		t.Fatal(err)
	}
	rs, err := s.ClaimBatch(ctx, "g", b, []string{"p"})
	if err != nil || rs[0].Ownership.GivenBack != a {
		t.Fatalf("ClaimBatch by b: %+v, %v; want the mark kept", rs, err)
	}

	end := mustSnap(t, s, "g")
	all, _, err := s.Changes(ctx, "g", start.Version, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, apply := range []string{"Apply", "ApplyAll"} {
		r := start.Clone()
		if apply == "Apply" {
			for _, c := range all {
				if err := r.Apply(c); err != nil {
					t.Fatal(err)
				}
			}
		} else if err := r.ApplyAll(all); err != nil {
			t.Fatal(err)
		}
		if r.Version != end.Version || len(r.Owners) != len(end.Owners) {
			t.Fatalf("%s: replica at %v with %d records; snapshot at %v with %d", apply, r.Version, len(r.Owners), end.Version, len(end.Owners))
		}
		for i := range r.Owners {
			x, y := r.Owners[i], end.Owners[i]
			if x.Partition != y.Partition || x.Session != y.Session || x.Epoch != y.Epoch || x.GivenBack != y.GivenBack {
				t.Errorf("%s: replica record %+v; snapshot %+v", apply, x, y)
			}
		}
	}
}

func record(t *testing.T, s *sqlitestore.Store, p string) store.Ownership {
	t.Helper()
	for _, o := range mustSnap(t, s, "g").Owners {
		if o.Partition == p {
			return o
		}
	}
	t.Fatalf("no record of %s", p)
	return store.Ownership{}
}
