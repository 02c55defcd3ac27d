package jobs_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

func TestBlackboard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f := newFleet(t, ctx, jobs.Config{Every: 10 * time.Minute})
		f.runFor = func(string, jobs.Run) time.Duration { return 5 * time.Minute }
		ks := keys("city-", 6)
		f.start(2, ks)
		time.Sleep(12 * time.Minute)
		// A bad record on a seventh key costs that key alone.
		if _, err := f.st.SetPartitions(ctx, f.group, store.PartitionSet{Partitions: append(partitionsOf(ks), store.Partition{ID: "zz-bad"})}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		writeBad(t, f, "zz-bad")
		for len(f.runningOn("m1"))+len(f.runningOn("m2")) == 0 {
			time.Sleep(10 * time.Second)
		}

		bb, err := jobs.Blackboard(ctx, f.st, f.group)
		if err != nil {
			t.Fatal(err)
		}
		if len(bb) != 7 {
			t.Fatalf("%d keys on the blackboard; want 7", len(bb))
		}
		running := 0
		for _, k := range bb[:6] {
			if k.Owner == "" || k.Epoch == 0 || k.Record == nil || k.Err != nil || k.Age <= 0 || k.Age > 10*time.Minute {
				t.Errorf("%s: %+v", k.Key, k)
				continue
			}
			if k.Record.Owner != k.Owner || k.Record.Runs < 1 && !k.Record.Running {
				t.Errorf("%s: record %+v owned by %s", k.Key, k.Record, k.Owner)
			}
			if k.Record.Running {
				running++
			}
		}
		if running == 0 {
			t.Errorf("no key running on the blackboard, with runs of 5 minutes every 10")
		}
		if bad := bb[6]; bad.Key != "zz-bad" || bad.Record != nil || !errors.Is(bad.Err, store.ErrCorrupt) {
			t.Errorf("bad record: %+v", bad)
		}

		var nilStore *memstore.Store
		if _, err := jobs.Blackboard(ctx, nilStore, f.group); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("nil store: %v", err)
		}
		f.leaveAll()
	})
}

func partitionsOf(ks []string) []store.Partition {
	ps := make([]store.Partition, len(ks))
	for i, k := range ks {
		ps[i] = store.Partition{ID: k}
	}
	return ps
}

// writeBad writes a checkpoint that is no record for key, at its owner's
// epoch, as another program sharing the group might.
func writeBad(t *testing.T, f *fleet, key string) {
	t.Helper()
	snap, err := f.st.Snapshot(f.ctx, f.group)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range snap.Owners {
		if o.Partition == key {
			if err := f.st.Checkpoint(f.ctx, f.group, key, o.Epoch, []byte("{oops")); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("%s has no owner", key)
}
