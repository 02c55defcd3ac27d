package herd_test

// Scenarios of a store that loses data, and of a slow store.

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
)

// TestScenarioStoreLosesData: the store loses everything (a restart without
// persistence) under a running fleet. The members notice, put back the
// partition set and their checkpoints, and go on: balanced again, no epoch
// reused, no checkpoint going backwards.
func TestScenarioStoreLosesData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFleet(t, ctx, 64)
		f.join(4)
		f.settle(5 * time.Second)
		time.Sleep(5 * time.Second) // virtual: let every handler checkpoint a few times
		f.check("before the loss", false)
		snap, err := f.st.Snapshot(ctx, f.group)
		if err != nil {
			t.Fatal(err)
		}
		var maxEpoch uint64
		for _, o := range snap.Owners {
			maxEpoch = max(maxEpoch, o.Epoch)
		}
		old := map[string]string{}
		for id, fm := range f.members {
			old[id] = fm.m.Session()
		}
		f.tr.Reset()
		start := time.Now()
		f.st.Wipe()
		// Every member notices at its next renewal or read: wait (in
		// virtual time) until each has a new session.
		for renewed := false; !renewed; {
			if time.Since(start) > herd.DefaultSessionTTL {
				t.Fatalf("members did not notice the store lost its data within the TTL")
			}
			time.Sleep(100 * time.Millisecond)
			renewed = true
			for id, fm := range f.members {
				if s := fm.m.Session(); s == "" || s == old[id] {
					renewed = false
				}
			}
		}
		f.settle(herd.DefaultSessionTTL + 5*time.Second)
		took := time.Since(start)
		f.check("after the loss", false) // includes: no checkpoint went backwards
		snap, err = f.st.Snapshot(ctx, f.group)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Partitions) != 64 {
			t.Fatalf("partition set after recovery has %d partitions, want 64", len(snap.Partitions))
		}
		for _, o := range snap.Owners {
			if o.Session != "" && o.Epoch <= maxEpoch {
				t.Fatalf("partition %s got epoch %d after the loss, not above %d from before", o.Partition, o.Epoch, maxEpoch)
			}
		}
		t.Logf("recovered from the loss in %v", took)
		for _, id := range f.live() {
			if err := f.drop(id).m.Leave(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestScenarioReadsBackOffOnASlowStore: 16 members share 2,000 partitions
// over a store that takes 1 ms per call, and 4 more join. 400 partitions are
// handed over one by one, and every release and claim wakes every member.
// Each member spaces its reads of the whole group by 4 x members x the last
// read's time, and claims a partition handed to it on the release
// notification, without a read: the moves are the minimum and the fleet
// does not bury the handovers under reads.
func TestScenarioReadsBackOffOnASlowStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFleet(t, ctx, 2000)
		slow := func(ids []string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, id := range ids {
				f.members[id].fault.SetLatency(time.Millisecond)
			}
		}
		reads := func() (n int64) {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, fm := range f.members {
				n += fm.fault.Ops().Reads
			}
			return n
		}

		slow(f.join(16))
		f.settle(10 * time.Second)
		f.check("16 members place 2,000 partitions", false)

		before := reads()
		f.measure("4 more join", 2*time.Second, func() { slow(f.join(4)) })
		perMember := float64(reads()-before) / 20
		t.Logf("4 joined: %.1f reads per member", perMember)
		// Spaced by 1 µs per partition alone (2 ms), each member read the
		// group about 60 times here.
		if perMember > 15 {
			t.Errorf("%.1f reads per member while 400 partitions moved; want at most 15", perMember)
		}

		for _, id := range f.live() {
			if err := f.drop(id).m.Leave(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
