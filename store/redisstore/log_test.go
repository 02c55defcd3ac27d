package redisstore

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
)

// A blocking read (XREAD) that returns entries of a new history of the
// group, written while the reader waited, is told apart by the tags in the
// entry ids: the reader gets ErrVersionGone, not another history's entries.
func TestChangesBlockedReadSeesNewGeneration(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := ctxT(t)
	const g = "gen"
	sess, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession")
	snap, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	old := snap.Version
	must(t, s.DeleteGroup(ctx, g, true), "DeleteGroup")
	for i := range 3 {
		_, err := s.OpenSession(ctx, g, "m"+strconv.Itoa(i), 1, time.Minute)
		must(t, err, "OpenSession")
	}
	_ = sess
	// The read the XREAD path makes after the check script found nothing:
	// the new log's entries 2 and 3 follow id "1-<old generation>".
	_, _, err = s.waitChanges(ctx, s.keys(g), old, 10, true, nil)
	wantIs(t, err, store.ErrVersionGone, "XREAD after a version of the deleted history")
}

// A Changes call that waited as long as the store lets it returns no
// entries and no error; the caller calls again.
func TestChangesBlockBounded(t *testing.T) {
	s, _ := newTestStore(t)
	s.log.block = 50 * time.Millisecond
	ctx := ctxT(t)
	_, err := s.OpenSession(ctx, "g", "m", 1, time.Minute)
	must(t, err, "OpenSession")
	snap, err := s.Snapshot(ctx, "g")
	must(t, err, "Snapshot")
	cs, v, err := s.Changes(ctx, "g", snap.Version, 10)
	if err != nil || len(cs) != 0 || v != snap.Version {
		t.Fatalf("Changes at the end of the log after its block: %v, %v, %v; want nothing, the same version, no error", cs, v, err)
	}
}

// An entry written by something else ends the version (the reader takes a
// new snapshot), and writes go on: a log whose ids are ahead of the
// version key, or a log key of another type, makes the next write start a
// new history instead of failing a change already made; a reader continues
// from a new snapshot.
func TestLogForeignEntries(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "foreign"
	sess, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession")
	snap, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	v := snap.Version
	k := s.keys(g)
	tag, _ := chain(nil, v.Tag, "garbage")
	id := strconv.FormatUint(v.Seq+1, 10) + "-" + strconv.FormatUint(tag, 10)
	must(t, raw.XAdd(ctx, &redis.XAddArgs{Stream: k.log, ID: id, Values: []string{"e", "garbage"}}).Err(), "XADD")
	_, _, err = s.Changes(ctx, g, v, 10)
	wantIs(t, err, store.ErrVersionGone, "Changes over an entry this store did not write")

	o, err := store.Claim(ctx, s, g, "p", sess)
	must(t, err, "Claim with a foreign entry at the log's next id")
	snap, err = s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	must(t, store.Release(ctx, s, g, "p", sess, o.Epoch), "Release")
	cs, _, err := s.Changes(ctx, g, snap.Version, 10)
	if err != nil || len(cs) != 1 || cs[0].Kind != store.Released {
		t.Fatalf("Changes after the new generation's snapshot: %+v, %v; want the Released entry", cs, err)
	}

	must(t, raw.Set(ctx, k.log, "not a stream", 0).Err(), "SET")
	_, err = store.Claim(ctx, s, g, "p", sess)
	must(t, err, "Claim with a log key of another type")
	_, _, err = s.Changes(ctx, g, snap.Version, 10)
	wantIs(t, err, store.ErrVersionGone, "Changes after the log key was overwritten")
	snap2, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	if snap2.Version == snap.Version || snap2.Version.Seq != 1 {
		t.Fatalf("after the log key was overwritten the version is %v; want a new history at 1", snap2.Version)
	}
}

// A failover to a replica that missed the latest entries: the new primary
// writes other entries at the same sequence numbers, past the reader's. The
// reader that had read the lost entries gets ErrVersionGone (its next entry
// does not chain from its tag), not the new entries applied to a state that
// holds changes the store no longer has. Simulated on one server by
// removing the last entries and putting the version key back, which is the
// state the replica is in.
func TestChangesAfterLostWrites(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "failover"
	k := s.keys(g)
	a, err := s.OpenSession(ctx, g, "a", 1, time.Minute)
	must(t, err, "OpenSession")
	replicaSnap, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	replicaVersion, err := raw.Get(ctx, k.version).Result()
	must(t, err, "GET version")
	// Written to the primary only: lost in the failover.
	for _, p := range []string{"p1", "p2", "p3"} {
		_, err := store.Claim(ctx, s, g, p, a)
		must(t, err, "Claim")
	}
	reader, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	// The failover: the replica has the log up to replicaSnap.
	// (Rebuilt rather than XDEL'd: a stream remembers its last id.)
	es, err := raw.XRange(ctx, k.log, "-", "+").Result()
	must(t, err, "XRANGE")
	must(t, raw.Del(ctx, k.log).Err(), "DEL")
	for _, e := range es[:replicaSnap.Version.Seq] {
		must(t, raw.XAdd(ctx, &redis.XAddArgs{Stream: k.log, ID: e.ID, Values: e.Values}).Err(), "XADD")
	}
	must(t, raw.Set(ctx, k.version, replicaVersion, 0).Err(), "SET version")
	must(t, raw.HDel(ctx, k.owners, "p1", "p2", "p3").Err(), "HDEL")
	// The new primary goes on past the reader's sequence.
	for _, p := range []string{"q1", "q2", "q3", "q4", "q5"} {
		_, err := store.Claim(ctx, s, g, p, a)
		must(t, err, "Claim")
	}
	_, _, err = s.Changes(ctx, g, reader.Version, 100)
	wantIs(t, err, store.ErrVersionGone, "Changes after entries lost in a failover")
	// A reader from before the loss continues.
	cs, _, err := s.Changes(ctx, g, replicaSnap.Version, 100)
	if err != nil || len(cs) != 5 || cs[0].Partition != "q1" {
		t.Fatalf("Changes after the replica's version: %+v, %v; want the 5 claims of q1..q5", cs, err)
	}
}

// TestMaxGroupLua: the scripts group as many changes per entry as the Go
// side reads them by.
func TestMaxGroupLua(t *testing.T) {
	if maxGroupLua != strconv.Itoa(maxGroup) {
		t.Fatalf("maxGroupLua %q, maxGroup %d", maxGroupLua, maxGroup)
	}
}

// TestGroupedEntries: a batch of 250 claims is three entries of the log
// (100, 100 and 50 changes), and reading it in pieces of any size, from a
// version inside an entry, returns the same changes with the same versions
// as one read.
func TestGroupedEntries(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "grouped"
	k := s.keys(g)
	a, err := s.OpenSession(ctx, g, "a", 1, time.Minute)
	must(t, err, "OpenSession")
	start, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	ids := make([]string, 250)
	for i := range ids {
		ids[i] = fmt.Sprintf("p%03d", i)
	}
	_, err = s.ClaimBatch(ctx, g, a, ids)
	must(t, err, "ClaimBatch")
	n, err := raw.XLen(ctx, k.log).Result()
	must(t, err, "XLEN")
	if n != 1+3 { // the session's opening, then the claims
		t.Fatalf("the log has %d entries, want 4", n)
	}
	all, end, err := s.Changes(ctx, g, start.Version, 1000)
	must(t, err, "Changes")
	if len(all) != 250 || end.Seq != start.Version.Seq+250 {
		t.Fatalf("one read: %d changes up to %v, want 250 up to seq %d", len(all), end, start.Version.Seq+250)
	}
	for i, c := range all {
		if c.Kind != store.Claimed || c.Partition != ids[i] || c.Version.Seq != start.Version.Seq+1+uint64(i) {
			t.Fatalf("change %d: %+v", i, c)
		}
	}
	if fresh, err := s.Snapshot(ctx, g); err != nil || fresh.Version != end {
		t.Fatalf("Snapshot's version %v, %v; want the last change's %v", fresh.Version, err, end)
	}
	for _, piece := range []int{1, 7, 30, 100, 101} {
		var got []store.Change
		v := start.Version
		for len(got) < 250 {
			cs, next, err := s.Changes(ctx, g, v, piece)
			must(t, err, "Changes")
			if len(cs) == 0 || len(cs) > piece || next != cs[len(cs)-1].Version {
				t.Fatalf("pieces of %d: after %v, %d changes up to %v", piece, v, len(cs), next)
			}
			got, v = append(got, cs...), next
		}
		for i := range all {
			if got[i].Version != all[i].Version || got[i].Partition != all[i].Partition {
				t.Fatalf("pieces of %d: change %d is %v %s, want %v %s", piece, i, got[i].Version, got[i].Partition, all[i].Version, all[i].Partition)
			}
		}
	}
	// A version inside an entry, of another history: gone.
	mid := all[150].Version
	mid.Tag ^= 1
	_, _, err = s.Changes(ctx, g, mid, 10)
	wantIs(t, err, store.ErrVersionGone, "Changes inside an entry of another history")
}

// TestGroupedTrim: the log keeps at least its limit of changes, counted in
// changes, not entries: a reader that far behind continues, one further
// behind than Redis's approximate trimming keeps reads a new snapshot.
func TestGroupedTrim(t *testing.T) {
	raw := redistest.Need(t)
	s := openWithPrefix(t, testPrefix(t, raw), WithLogLimit(250))
	ctx := ctxT(t)
	const g = "grouped-trim"
	a, err := s.OpenSession(ctx, g, "a", 1, time.Minute)
	must(t, err, "OpenSession")
	var first, kept store.Version
	for b := range 300 { // 300 entries of 2 changes
		if b == 0 || b == 200 {
			snap, err := s.Snapshot(ctx, g)
			must(t, err, "Snapshot")
			if b == 0 {
				first = snap.Version
			} else {
				kept = snap.Version // 200 changes behind the end
			}
		}
		_, err := s.ClaimBatch(ctx, g, a, []string{fmt.Sprintf("p%03d-a", b), fmt.Sprintf("p%03d-b", b)})
		must(t, err, "ClaimBatch")
	}
	cs, _, err := s.Changes(ctx, g, kept, 1000)
	if err != nil || len(cs) != 200 {
		t.Fatalf("Changes 200 behind with a limit of 250: %d, %v", len(cs), err)
	}
	_, _, err = s.Changes(ctx, g, first, 1000)
	wantIs(t, err, store.ErrVersionGone, "Changes 600 behind with a limit of 250")
	n, err := raw.XLen(ctx, s.keys(g).log).Result()
	must(t, err, "XLEN")
	if n > 250 {
		t.Fatalf("the log has %d entries of 2 changes with a limit of 250 changes", n)
	}
}

// A call of Changes whose first read of full entries and lone ones holds
// fewer changes than asked for reads on, asking for about the entries the
// rest needs: each call returns as many changes as asked for while the log
// has more, in order, whatever mix of entries the reads meet.
func TestChangesMixedEntries(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := ctxT(t)
	const g = "mixed"
	a, err := s.OpenSession(ctx, g, "a", 1, time.Minute)
	must(t, err, "OpenSession")
	start, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	claim := func(from, n int) {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("p%04d", from+i)
		}
		_, err := s.ClaimBatch(ctx, g, a, ids)
		must(t, err, "ClaimBatch")
	}
	lone := func(n int) {
		for range n {
			_, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
			must(t, err, "OpenSession")
		}
	}
	// 100 entries of 595 changes, then 60 entries of 1,050.
	claim(0, 500)
	lone(95)
	claim(500, 1000)
	lone(50)
	const total = 1645
	all, end, err := s.Changes(ctx, g, start.Version, 2*total)
	must(t, err, "Changes")
	if len(all) != total || end.Seq != start.Version.Seq+total {
		t.Fatalf("one call: %d changes up to %v, want %d up to seq %d", len(all), end, total, start.Version.Seq+total)
	}
	for i, c := range all {
		if c.Version.Seq != start.Version.Seq+1+uint64(i) {
			t.Fatalf("change %d: %+v", i, c)
		}
	}
	for _, limit := range []int{1, 99, 100, 600, 1000, 1645} {
		var got []store.Change
		v := start.Version
		for len(got) < total {
			cs, next, err := s.Changes(ctx, g, v, limit)
			must(t, err, "Changes")
			if want := min(limit, total-len(got)); len(cs) != want || next != cs[len(cs)-1].Version {
				t.Fatalf("calls of %d: after %v, %d changes up to %v, want %d", limit, v, len(cs), next, want)
			}
			got, v = append(got, cs...), next
		}
		for i := range all {
			if got[i].Version != all[i].Version || got[i].Kind != all[i].Kind || got[i].Partition != all[i].Partition {
				t.Fatalf("calls of %d: change %d is %v %v %s, want %v %v %s", limit, i, got[i].Version, got[i].Kind, got[i].Partition, all[i].Version, all[i].Kind, all[i].Partition)
			}
		}
	}
}
