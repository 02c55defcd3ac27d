package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	_, _, err = s.waitChanges(ctx, s.keys(g), old, 10)
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
	id := strconv.FormatUint(v.Seq+1, 10) + "-" + strconv.FormatUint(chain(v.Tag, "garbage"), 10)
	must(t, raw.XAdd(ctx, &redis.XAddArgs{Stream: k.log, ID: id, Values: []string{"e", "garbage"}}).Err(), "XADD")
	_, _, err = s.Changes(ctx, g, v, 10)
	wantIs(t, err, store.ErrVersionGone, "Changes over an entry this store did not write")

	o, err := s.Claim(ctx, g, "p", sess)
	must(t, err, "Claim with a foreign entry at the log's next id")
	snap, err = s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	must(t, s.Release(ctx, g, "p", sess, o.Epoch), "Release")
	cs, _, err := s.Changes(ctx, g, snap.Version, 10)
	if err != nil || len(cs) != 1 || cs[0].Kind != store.Released {
		t.Fatalf("Changes after the new generation's snapshot: %+v, %v; want the Released entry", cs, err)
	}

	must(t, raw.Set(ctx, k.log, "not a stream", 0).Err(), "SET")
	_, err = s.Claim(ctx, g, "p", sess)
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
		_, err := s.Claim(ctx, g, p, a)
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
		_, err := s.Claim(ctx, g, p, a)
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
