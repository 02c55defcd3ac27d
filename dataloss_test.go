package herd_test

import (
	"context"
	"encoding/binary"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// waitSession waits (in virtual time) until fm has a session other than old.
func waitSession(t *testing.T, fm *fleetMember, old string, limit time.Duration) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if s := fm.m.Session(); s != "" && s != old {
			return
		}
		if time.Since(start) > limit {
			t.Fatalf("%s opened no new session within %v", fm.m.ID(), limit)
		}
	}
}

// TestDataLossAfterLongOutage: the store is unreachable for longer than the
// session TTL (every member fences itself), then comes back empty, and one
// member reconnects 300 ms before the others. It must not claim the others'
// partitions before they restore their checkpoints: no checkpoint goes
// backwards, no epoch is reused.
func TestDataLossAfterLongOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFleet(t, ctx, 16)
		f.cfg.SessionTTL = 2 * time.Second
		ids := f.join(4)
		f.settle(5 * time.Second)
		time.Sleep(5 * time.Second) // virtual: every handler checkpoints a few times
		f.check("before the outage", false)
		maxEpoch := maxEpochOf(t, f)
		old := map[string]string{}
		for _, id := range ids {
			old[id] = f.members[id].m.Session()
			f.members[id].fault.SetCut(true)
		}
		time.Sleep(4 * time.Second) // longer than the TTL: everyone fenced
		f.st.Wipe()
		f.members[ids[0]].fault.SetCut(false)
		waitSession(t, f.members[ids[0]], old[ids[0]], 5*time.Second)
		time.Sleep(300 * time.Millisecond)
		for _, id := range ids[1:] {
			f.members[id].fault.SetCut(false)
		}
		f.tr.Reset()
		f.settle(10 * time.Second)
		time.Sleep(2 * time.Second)
		f.check("after the outage", false) // includes: no checkpoint went backwards
		checkEpochsAbove(t, f, maxEpoch)
		for _, id := range f.live() {
			if err := f.drop(id).m.Leave(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestDataLossStaleRestoreLoses: a member cut off from the store loses its
// partitions to another member, which makes progress; then the store loses
// its data and the cut-off member reconnects first. Its old checkpoints must
// not win over its successor's newer ones.
func TestDataLossStaleRestoreLoses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFleet(t, ctx, 8)
		f.cfg.SessionTTL = 2 * time.Second
		ids := f.join(2)
		a, b := f.members[ids[0]], f.members[ids[1]]
		f.settle(5 * time.Second)
		time.Sleep(3 * time.Second)
		f.check("before the cut", false)
		oldA := a.m.Session()
		a.fault.SetCut(true)
		f.drop(ids[0])
		f.settle(10 * time.Second) // b took a's partitions over
		time.Sleep(10 * time.Second)
		f.check("while a is cut off", false)
		maxEpoch := maxEpochOf(t, f)

		// The store loses its data; a reconnects before b notices.
		oldB := b.m.Session()
		b.gate.Pause()
		f.st.Wipe()
		a.fault.SetCut(false)
		waitSession(t, a, oldA, 5*time.Second)
		b.gate.Resume()
		f.mu.Lock()
		f.members[ids[0]] = a
		f.mu.Unlock()
		waitSession(t, b, oldB, 5*time.Second)
		f.tr.Reset()
		f.settle(10 * time.Second)
		time.Sleep(2 * time.Second)
		f.check("after the loss", false)
		checkEpochsAbove(t, f, maxEpoch)
		for _, id := range f.live() {
			if err := f.drop(id).m.Leave(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func maxEpochOf(t *testing.T, f *fleet) uint64 {
	t.Helper()
	snap, err := f.st.Snapshot(f.ctx, f.group)
	if err != nil {
		t.Fatal(err)
	}
	var e uint64
	for _, o := range snap.Owners {
		e = max(e, o.Epoch)
	}
	return e
}

func checkEpochsAbove(t *testing.T, f *fleet, floor uint64) {
	t.Helper()
	snap, err := f.st.Snapshot(f.ctx, f.group)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range snap.Owners {
		if o.Session != "" && o.Epoch <= floor {
			t.Fatalf("partition %s got epoch %d after the loss, not above %d from before", o.Partition, o.Epoch, floor)
		}
	}
}

// TestLeaveDuringOutage: a member holding 64 partitions is cut off from a
// store whose calls time out; once it has fenced itself it has 64
// checkpoints to restore. Leave must still return within about
// RenewTimeout, not after a pass over every pending restore.
func TestLeaveDuringOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := faultstore.Wrap(memstore.New())
		cfg := herd.Config{
			Group: "g", Member: "m1", Partitions: herd.Numbered(64),
			Logger: slog.New(slog.DiscardHandler),
			Handler: func(c *herd.Claim) error {
				var b [8]byte
				binary.BigEndian.PutUint64(b[:], 1)
				cctx, ccancel := context.WithTimeout(c.Context(), time.Second)
				defer ccancel()
				_ = c.Checkpoint(cctx, b[:])
				<-c.Context().Done()
				return nil
			},
		}
		m, err := herd.Join(ctx, st, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for len(m.Owned()) < 64 {
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		st.SetLatency(time.Hour) // every call times out
		st.SetCut(true)
		for m.Session() != "" {
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(30 * time.Second) // in the retry loop
		start := time.Now()
		lctx, lcancel := context.WithTimeout(ctx, time.Hour)
		defer lcancel()
		if err := m.Leave(lctx); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		renewTimeout := herd.DefaultSessionTTL / 3
		if took > renewTimeout+time.Second {
			t.Fatalf("Leave during an outage took %v, more than RenewTimeout %v", took, renewTimeout)
		}
		t.Logf("Leave during an outage took %v (virtual)", took)
	})
}
