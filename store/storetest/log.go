package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/herdhq/herd/store"
)

// The group's log (store.Store.Changes): ordered and gap-free under
// concurrent writers, a snapshot plus the entries after it equals a later
// snapshot, ErrVersionGone when a version cannot be continued, expiries
// logged exactly once, batches equal to the single calls.

// readLog reads the entries after from until the version reaches until
// (same generation), failing the test on any error or gap.
func (e *env) readLog(after, until store.Version) []store.Change {
	e.t.Helper()
	return e.readLogOf(e.group, after, until)
}

// readLogOf is readLog of another group.
func (e *env) readLogOf(group string, after, until store.Version) []store.Change {
	e.t.Helper()
	var out []store.Change
	v := after
	for v.Seq < until.Seq {
		cs, next, err := e.s.Changes(e.ctx, group, v, 1+rand.IntN(50))
		if err != nil {
			e.t.Fatalf("Changes(after %v) on the way to %v: %v; want the entries", v, until, err)
		}
		checkEntries(e.t, v, next, cs)
		out = append(out, cs...)
		v = next
	}
	if v != until {
		e.t.Fatalf("reading the log from %v reached %v; want exactly %v", after, v, until)
	}
	return out
}

// checkEntries fails the test unless cs are the entries right after v, in
// order and without a gap, and next is the version of the last one (v if
// there is none).
func checkEntries(t *testing.T, v, next store.Version, cs []store.Change) {
	t.Helper()
	for i, c := range cs {
		if c.Version.Seq != v.Seq+uint64(i)+1 {
			t.Fatalf("Changes(after %v) entry %d is at %v; want Seq %d (ordered, gap-free)", v, i, c.Version, v.Seq+uint64(i)+1)
		}
	}
	want := v
	if len(cs) > 0 {
		want = cs[len(cs)-1].Version
	}
	if next != want {
		t.Fatalf("Changes(after %v) returned %d entries and version %v; want %v, the last entry's", v, len(cs), next, want)
	}
}

// replay applies cs to a copy of from, one by one (Apply) and all at once
// (ApplyAll), and fails the test unless each result equals to (the
// sessions' Remaining aside).
func replay(t *testing.T, from, to *store.Snapshot, cs []store.Change, why string) {
	t.Helper()
	r := from.Clone()
	for _, c := range cs {
		if err := r.Apply(c); err != nil {
			t.Fatalf("%s: Apply(%+v) to the replica at %v: %v", why, c, r.Version, err)
		}
	}
	if d := diffSnapshots(r, to); d != "" {
		t.Fatalf("%s: the snapshot at %v plus %d entries differs from the snapshot at %v: %s", why, from.Version, len(cs), to.Version, d)
	}
	r = from.Clone()
	if err := r.ApplyAll(cs); err != nil {
		t.Fatalf("%s: ApplyAll of %d entries to the replica at %v: %v", why, len(cs), from.Version, err)
	}
	if d := diffSnapshots(r, to); d != "" {
		t.Fatalf("%s: the snapshot at %v plus %d entries (ApplyAll) differs from the snapshot at %v: %s", why, from.Version, len(cs), to.Version, d)
	}
}

// diffSnapshots describes the first difference between a replica and a
// snapshot, "" if none: sessions by id, member and weight, partitions,
// loads, records, PartitionSetStored and Version.
func diffSnapshots(r, s *store.Snapshot) string {
	if r.Version != s.Version {
		return fmt.Sprintf("version %v, want %v", r.Version, s.Version)
	}
	if r.PartitionSetStored != s.PartitionSetStored {
		return fmt.Sprintf("PartitionSetStored %v, want %v", r.PartitionSetStored, s.PartitionSetStored)
	}
	if !slices.Equal(r.Partitions, s.Partitions) {
		return fmt.Sprintf("partitions %v, want %v", r.Partitions, s.Partitions)
	}
	if !slices.Equal(r.Loads, s.Loads) {
		return fmt.Sprintf("loads %v, want %v", r.Loads, s.Loads)
	}
	if !slices.EqualFunc(r.Sessions, s.Sessions, func(a, b store.SessionInfo) bool {
		return a.ID == b.ID && a.Member == b.Member && a.Weight == b.Weight
	}) {
		return fmt.Sprintf("sessions %v, want %v", r.Sessions, s.Sessions)
	}
	if !slices.EqualFunc(r.Owners, s.Owners, sameOwner) {
		for i := range max(len(r.Owners), len(s.Owners)) {
			if i >= len(r.Owners) || i >= len(s.Owners) || !sameOwner(r.Owners[i], s.Owners[i]) {
				var a, b string
				if i < len(r.Owners) {
					a = fmtOwner(r.Owners[i])
				}
				if i < len(s.Owners) {
					b = fmtOwner(s.Owners[i])
				}
				return fmt.Sprintf("record %d is %s, want %s", i, a, b)
			}
		}
	}
	return ""
}

// testLogGapFree: writers change the group concurrently while a reader
// follows the log; the reader sees every successful change exactly once,
// in order and without gaps, and the snapshot at the start plus the log
// equals the snapshot at the end.
func testLogGapFree(e *env) {
	t := e.t
	e.setPartitions("p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7")
	start := e.snap()
	if start.Version.Tag == 0 || start.Version.Seq == 0 {
		t.Fatalf("Snapshot after SetPartitions has version %v; want a tag and a sequence > 0", start.Version)
	}
	const writers, opsEach = 6, 25
	var mu sync.Mutex
	changes := 1 // the SetPartitions below
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			s, err := e.s.OpenSession(e.ctx, e.group, fmt.Sprintf("m%d", w), 1, longTTL)
			if err != nil {
				t.Errorf("OpenSession: %v", err)
				return
			}
			n := 1
			held := map[string]uint64{}
			for range opsEach {
				p := fmt.Sprintf("p%d", rng.IntN(8))
				if ep, ok := held[p]; ok && rng.IntN(2) == 0 {
					if err := store.Release(e.ctx, e.s, e.group, p, s, ep); err == nil {
						n++
					}
					delete(held, p)
					continue
				}
				o, err := store.Claim(e.ctx, e.s, e.group, p, s)
				switch {
				case err == nil:
					n++
					held[p] = o.Epoch
				case !errors.Is(err, store.ErrClaimed):
					t.Errorf("Claim(%q): %v", p, err)
				}
			}
			if w%2 == 0 {
				if err := e.s.CloseSession(e.ctx, e.group, s); err != nil {
					t.Errorf("CloseSession: %v", err)
				}
				n++
			}
			mu.Lock()
			changes += n
			mu.Unlock()
		})
	}
	wg.Go(func() {
		if _, err := e.s.SetPartitions(e.ctx, e.group, store.PartitionSet{Partitions: []store.Partition{{ID: "p0"}, {ID: "p9", Weight: 2}}}); err != nil {
			t.Errorf("SetPartitions: %v", err)
		}
	})
	// The reader follows the log while the writers write.
	var got []store.Change
	readerCtx, stopReader := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		v := start.Version
		for {
			cs, next, err := e.s.Changes(readerCtx, e.group, v, 16)
			if readerCtx.Err() != nil {
				return
			}
			if err != nil {
				t.Errorf("Changes(after %v) while writers write: %v", v, err)
				return
			}
			checkEntries(t, v, next, cs)
			mu.Lock()
			got = append(got, cs...)
			mu.Unlock()
			v = next
		}
	}()
	wg.Wait()
	if t.Failed() {
		stopReader()
		<-done
		t.FailNow()
	}
	end := e.snap()
	if end.Version.Seq != start.Version.Seq+uint64(changes) {
		stopReader()
		<-done
		t.Fatalf("after %d changes from version %v the snapshot is at %v; want %d entries more", changes, start.Version, end.Version, changes)
	}
	e.waitUntil(eventWait, "the reader to reach the end of the log", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= changes
	})
	stopReader()
	<-done
	if len(got) != changes {
		t.Fatalf("the reader read %d entries; want %d, one per successful change", len(got), changes)
	}
	replay(t, start, end, got, "concurrent writers")
}
