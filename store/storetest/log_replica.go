package storetest

// The replica property: a snapshot plus the log's entries equals a later snapshot, over random operations.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/herdhq/herd/store"
)

// testLogReplicaProperty: after random sequences of concurrent operations
// (seeded), every snapshot taken along the way plus the entries after it
// equals the final snapshot, and equals the first snapshot plus the entries
// up to its version: the version a snapshot reports is exactly the point of
// the log it shows.
func testLogReplicaProperty(e *env) {
	t := e.t
	for round := range 8 {
		seed := uint64(round)*1000 + 42
		e.group = newGroup(t, fmt.Sprintf("-r%d", round))
		e.setPartitions("a", "b", "c", "d", "e", "f")
		first := e.snap()
		var mu sync.Mutex
		snaps := []*store.Snapshot{}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() { e.randomOps(seed+uint64(w), 40) })
		}
		wg.Go(func() {
			for range 6 {
				s, err := e.s.Snapshot(e.ctx, e.group)
				if err != nil {
					t.Errorf("Snapshot: %v", err)
					return
				}
				mu.Lock()
				snaps = append(snaps, s)
				mu.Unlock()
			}
		})
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		// The short sessions must have expired, and been logged so, before
		// the last snapshot: else the reads of the log below may notice
		// one and log its expiry after that snapshot's version.
		for deadline := time.Now().Add(expiryGrace + time.Second); ; {
			next, err := e.s.ExpireSessions(e.ctx, e.group)
			if err != nil {
				t.Fatalf("ExpireSessions: %v", err)
			}
			if next == 0 || next > longTTL/2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a session of at most 50 ms is still alive (next expiry in %v)", next)
			}
			time.Sleep(next)
		}
		last := e.snap()
		all := e.readLog(first.Version, last.Version)
		replay(t, first, last, all, fmt.Sprintf("seed %d: first snapshot", seed))
		for _, s := range snaps {
			if s.Version.Seq < first.Version.Seq || s.Version.Seq > last.Version.Seq {
				t.Fatalf("seed %d: a snapshot taken between versions %v and %v reports %v", seed, first.Version, last.Version, s.Version)
			}
			k := s.Version.Seq - first.Version.Seq
			replay(t, first, s, all[:k], fmt.Sprintf("seed %d: first snapshot up to a later one", seed))
			replay(t, s, last, all[k:], fmt.Sprintf("seed %d: a snapshot taken along the way", seed))
		}
	}
}

// randomOps runs n random operations on the env's group with its own
// session(s): open, close, claim, release, give back, batch claim and
// release, checkpoint, restore, set partitions, expire. Errors the race allows
// (ErrClaimed, ErrNotOwner, ErrSessionExpired) are ignored.
func (e *env) randomOps(seed uint64, n int) {
	t := e.t
	rng := rand.New(rand.NewPCG(seed, seed^0xabcdef))
	parts := []string{"a", "b", "c", "d", "e", "f", "g"}
	var s string
	held := map[string]uint64{}
	open := func() {
		var err error
		s, err = e.s.OpenSession(e.ctx, e.group, fmt.Sprintf("m%d", seed), rng.IntN(3), longTTL)
		if err != nil {
			t.Errorf("OpenSession: %v", err)
		}
		clear(held)
	}
	open()
	allowed := func(what string, err error) {
		if err != nil && !errors.Is(err, store.ErrClaimed) && !errors.Is(err, store.ErrNotOwner) && !errors.Is(err, store.ErrSessionExpired) {
			t.Errorf("%s: %v", what, err)
		}
	}
	for range n {
		p := parts[rng.IntN(len(parts))]
		switch op := rng.IntN(20); {
		case op < 7:
			o, err := store.Claim(e.ctx, e.s, e.group, p, s)
			allowed("Claim", err)
			if err == nil {
				held[p] = o.Epoch
			}
		case op < 9:
			if ep, ok := held[p]; ok {
				allowed("Release", store.Release(e.ctx, e.s, e.group, p, s, ep))
				delete(held, p)
			}
		case op < 10:
			if ep, ok := held[p]; ok {
				allowed("GiveBack", e.s.GiveBack(e.ctx, e.group, p, s, ep))
				delete(held, p)
			}
		case op < 11:
			ps := []string{p, parts[(slices.Index(parts, p)+1)%len(parts)]}
			rs, err := e.s.ClaimBatch(e.ctx, e.group, s, ps)
			allowed("ClaimBatch", err)
			for i, r := range rs {
				allowed("ClaimBatch result", r.Err)
				if r.Err == nil {
					held[ps[i]] = r.Ownership.Epoch
				}
			}
		case op < 12:
			var rel []store.Ownership
			for q, ep := range held {
				rel = append(rel, store.Ownership{Partition: q, Epoch: ep})
			}
			errs, err := e.s.ReleaseBatch(e.ctx, e.group, s, rel)
			allowed("ReleaseBatch", err)
			for _, err := range errs {
				allowed("ReleaseBatch result", err)
			}
			clear(held)
		case op < 13:
			if ep, ok := held[p]; ok {
				allowed("Checkpoint", e.s.Checkpoint(e.ctx, e.group, p, ep, []byte("x")))
			}
		case op < 14:
			allowed("Restore", e.s.Restore(e.ctx, e.group, fmt.Sprintf("r%d", rng.IntN(4)), 1+rng.Uint64N(100), []byte("r")))
		case op < 15:
			allowed("CloseSession", e.s.CloseSession(e.ctx, e.group, s))
			open()
		case op < 16:
			set := []store.Partition{}
			for _, q := range parts {
				if rng.IntN(3) > 0 {
					set = append(set, store.Partition{ID: q, Weight: rng.IntN(3)})
				}
			}
			_, err := e.s.SetPartitions(e.ctx, e.group, store.PartitionSet{Partitions: set})
			allowed("SetPartitions", err)
		case op < 17:
			_, err := e.s.ExpireSessions(e.ctx, e.group)
			allowed("ExpireSessions", err)
		case op < 18:
			// A session left to expire during the round.
			if _, err := e.s.OpenSession(e.ctx, e.group, "short", 1, time.Duration(1+rng.IntN(50))*time.Millisecond); err != nil {
				t.Errorf("OpenSession: %v", err)
			}
		default:
			allowed("KeepAlive", keepErr(e.s.KeepAlive(e.ctx, e.group, s, longTTL)))
		}
	}
}

// testLogVersionGone: ErrVersionGone for a version of another generation,
// one ahead of the store, and one of a deleted group; the zero version of
// a group never written ends as soon as the group is written.
func testLogVersionGone(e *env) {
	t := e.t
	fresh := e.snap()
	if fresh.Version != (store.Version{}) {
		t.Fatalf("Snapshot of a group never written has version %v; want the zero Version", fresh.Version)
	}
	s := e.open("m", longTTL)
	_, _, err := e.s.Changes(e.ctx, e.group, store.Version{}, 10)
	wantErr(t, err, store.ErrVersionGone, "Changes(after the zero Version) once the group was written", "the zero Version is no point of a written log")

	snap := e.snap()
	v := snap.Version
	for _, bad := range []store.Version{
		{Seq: v.Seq, Tag: v.Tag + 1},
		{Seq: 0, Tag: v.Tag ^ 1<<40},
		{Seq: v.Seq + 5, Tag: v.Tag},
	} {
		_, _, err := e.s.Changes(e.ctx, e.group, bad, 10)
		wantErr(t, err, store.ErrVersionGone, fmt.Sprintf("Changes(after %v) when the log is at %v", bad, v), "another history, or ahead of the store")
	}
	if err := e.s.DeleteGroup(e.ctx, e.group, true); err != nil {
		t.Fatalf("DeleteGroup(force): %v", err)
	}
	_ = s
	e.open("m2", longTTL) // a new history of the group
	after := e.snap()
	if after.Version.Tag == v.Tag {
		t.Fatalf("after DeleteGroup the group's log has the tag %x of the deleted one; want another history", v.Tag)
	}
	_, _, err = e.s.Changes(e.ctx, e.group, v, 10)
	wantErr(t, err, store.ErrVersionGone, "Changes(after a version of the deleted group)", "the log was deleted with the group")
	// The new history continues from its own snapshot.
	e.open("m3", longTTL)
	cs := e.readLog(after.Version, e.snap().Version)
	if len(cs) != 1 || cs[0].Kind != store.SessionOpened || cs[0].Member != "m3" {
		t.Fatalf("the entries after %v are %+v; want the one SessionOpened of m3", after.Version, cs)
	}
}
