package storetest

import (
	"fmt"
	"slices"
	"sync"

	"github.com/herdhq/herd/store"
)

// numbered returns n partitions "<prefix>0".. with the given weight.
func numbered(prefix string, n, weight int) []store.Partition {
	ps := make([]store.Partition, n)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprintf("%s%d", prefix, i), Weight: weight}
	}
	return ps
}

// setIn calls SetPartitions and fails the test on an error.
func (e *env) setIn(group string, set store.PartitionSet) store.SetResult {
	e.t.Helper()
	res, err := e.s.SetPartitions(e.ctx, group, set)
	if err != nil {
		e.t.Fatalf("SetPartitions(%q, kind %q, mode %d, %d partitions): %v; want nil", group, set.Kind, set.Mode, len(set.Partitions), err)
	}
	return res
}

// testGroupKind: a group takes the kind first named, shows it in
// Snapshot.Kind, and refuses a member of the other kind in every mode,
// writing nothing; "" leaves the kind alone; DeleteGroup forgets it.
func testGroupKind(e *env) {
	t := e.t
	set := []store.Partition{{ID: "a"}, {ID: "b"}}
	if got := e.setIn(e.group, store.PartitionSet{Kind: store.KindKeys, Mode: store.SetKindOnly}); got.Kind != store.KindKeys || got.Stored || got.Written {
		t.Fatalf("SetPartitions(kind only, keys) on a new group = %+v; want Kind keys, nothing stored or written", got)
	}
	if got := e.snap(); got.Kind != store.KindKeys || got.PartitionSetStored {
		t.Fatalf("Snapshot after a kind-only call: Kind %q, PartitionSetStored %v; want keys, false", got.Kind, got.PartitionSetStored)
	}
	e.setIn(e.group, store.PartitionSet{Kind: store.KindKeys, Partitions: set})
	before := e.snap()
	for _, mode := range []store.SetMode{store.SetKindOnly, store.SetReplace, store.SetIfAbsent} {
		res, err := e.s.SetPartitions(e.ctx, e.group, store.PartitionSet{Kind: store.KindPartitions, Partitions: numbered("x", 3, 1), Mode: mode})
		wantErr(t, err, store.ErrGroupKind, fmt.Sprintf("SetPartitions(kind partitions, mode %d) on a group of keys", mode),
			"a group refuses a member of another kind")
		if res.Kind != store.KindKeys {
			t.Fatalf("refused SetPartitions returned Kind %q; want %q, the group's", res.Kind, store.KindKeys)
		}
	}
	if after := e.snap(); after.Version != before.Version || len(after.Partitions) != 2 || after.Kind != store.KindKeys {
		t.Fatalf("refused calls changed the group: version %v -> %v, %d partitions, kind %q; want nothing changed",
			before.Version, after.Version, len(after.Partitions), after.Kind)
	}
	// An operator's set (no kind) is taken, and the kind kept.
	if got := e.setIn(e.group, store.PartitionSet{Partitions: []store.Partition{{ID: "c"}}}); !got.Written || got.Kind != store.KindKeys {
		t.Fatalf("SetPartitions with no kind on a group of keys = %+v; want written, Kind keys", got)
	}
	if err := e.s.DeleteGroup(e.ctx, e.group, false); err != nil {
		t.Fatalf("DeleteGroup: %v", err)
	}
	if got := e.setIn(e.group, store.PartitionSet{Kind: store.KindPartitions, Mode: store.SetKindOnly}); got.Kind != store.KindPartitions {
		t.Fatalf("after DeleteGroup, SetPartitions(kind partitions) = %+v; want the group to take kind partitions", got)
	}
}

// testSetDigest: a set equal to the stored one (in any order) is not
// written again and logs nothing, small or large; SetIfAbsent keeps a
// stored set and says whether it differs; SetResult says what happened.
func testSetDigest(e *env) {
	t := e.t
	for _, n := range []int{3, 500} { // 500: more than a backend may send in one step
		group := fmt.Sprintf("%s-%d", e.group, n)
		set := numbered("p", n, 1)
		first := e.setIn(group, store.PartitionSet{Kind: store.KindPartitions, Partitions: set, Mode: store.SetIfAbsent})
		if !first.Written || first.Replaced || !first.Same || !first.Stored || first.Kind != store.KindPartitions {
			t.Fatalf("n=%d: SetIfAbsent on a new group = %+v; want written (not replaced), same, stored, kind partitions", n, first)
		}
		v := e.snapOf(group).Version
		reversed := slices.Clone(set)
		slices.Reverse(reversed)
		for _, mode := range []store.SetMode{store.SetReplace, store.SetIfAbsent} {
			got := e.setIn(group, store.PartitionSet{Kind: store.KindPartitions, Partitions: reversed, Mode: mode})
			if got.Written || !got.Same || !got.Stored {
				t.Fatalf("n=%d: SetPartitions(the same set reordered, mode %d) = %+v; want same, not written", n, mode, got)
			}
		}
		if after := e.snapOf(group).Version; after != v {
			t.Fatalf("n=%d: setting the stored set again moved the version %v -> %v; want nothing logged", n, v, after)
		}
		other := numbered("p", n+1, 1)
		kept := e.setIn(group, store.PartitionSet{Kind: store.KindPartitions, Partitions: other, Mode: store.SetIfAbsent})
		if kept.Written || kept.Same || !kept.Stored {
			t.Fatalf("n=%d: SetIfAbsent of another set over a stored one = %+v; want kept: stored, not same, not written", n, kept)
		}
		if got := len(e.snapOf(group).Partitions); got != n {
			t.Fatalf("n=%d: after SetIfAbsent kept the stored set, the snapshot has %d partitions; want %d", n, got, n)
		}
		weighted := numbered("p", n, 2) // same ids, other weights: another set
		rep := e.setIn(group, store.PartitionSet{Kind: store.KindPartitions, Partitions: weighted})
		if !rep.Written || !rep.Replaced || !rep.Same {
			t.Fatalf("n=%d: SetReplace of a set with other weights = %+v; want written, replaced", n, rep)
		}
		snap := e.snapOf(group)
		if len(snap.Partitions) != n || snap.Partitions[0].Weight != 2 || snap.Version.Seq != v.Seq+1 {
			t.Fatalf("n=%d: after the replace: %d partitions, weight %d, version %v (was %v); want %d, weight 2, one entry logged",
				n, len(snap.Partitions), snap.Partitions[0].Weight, snap.Version, v, n)
		}
	}
}

// testSetDigestRace: members joining at once with the same set: the store
// writes it once (one PartitionsSet entry), whatever the interleaving.
func testSetDigestRace(e *env) {
	t := e.t
	set := numbered("q", 300, 1)
	const n = 8
	var wg sync.WaitGroup
	results := make([]store.SetResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = e.s.SetPartitions(e.ctx, e.group, store.PartitionSet{Kind: store.KindPartitions, Partitions: set})
		})
	}
	wg.Wait()
	written := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("concurrent SetPartitions %d: %v", i, errs[i])
		}
		if results[i].Written {
			written++
		}
	}
	snap := e.snap()
	if written != 1 || snap.Version.Seq != 1 {
		t.Fatalf("%d members setting the same set at once: %d wrote it, log at %d entries; want 1 and 1", n, written, snap.Version.Seq)
	}
}
