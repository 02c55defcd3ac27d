package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/store"
)

// wantMalformed fails the test unless snap lists exactly one malformed
// record of this kind and id, with a reason naming key, and leaves it out of
// the snapshot's lists.
func wantMalformed(t *testing.T, snap *store.Snapshot, kind, id, key string) {
	t.Helper()
	n, capped := 0, store.BadRecord(kind, id, "").ID
	for _, m := range snap.Malformed {
		if m.Kind == kind && m.ID == capped {
			n++
			if !strings.Contains(m.Reason, key) {
				t.Fatalf("malformed %s %q: reason %q does not name key %q", kind, id, m.Reason, key)
			}
		}
	}
	if n != 1 {
		t.Fatalf("snapshot lists malformed records %+v; want exactly one %s %q", snap.Malformed, kind, capped)
	}
	switch kind {
	case store.MalformedSession:
		if snap.Alive(id) {
			t.Fatalf("malformed session %q is listed as live", id)
		}
	case store.MalformedPartition:
		for _, p := range snap.Partitions {
			if p.ID == id {
				t.Fatalf("malformed partition %q is in the partition set", id)
			}
		}
	case store.MalformedOwnership:
		for _, o := range snap.Owners {
			if o.Partition == id {
				t.Fatalf("malformed ownership record of %q is listed: %+v", id, o)
			}
		}
	}
}

// TestSnapshotSkipsMalformedRecords: records another program wrote into the
// group's keys (garbage values, ids no member could have written, a session
// without its member record) are each left out of the snapshot and listed in
// Snapshot.Malformed, with their ids capped; every other record reads as
// before, and the other partitions can still be claimed. Before, one of them
// failed every Snapshot with ErrCorrupt, so no member took over anything.
func TestSnapshotSkipsMalformedRecords(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "malformed"
	k := s.keys(g)
	must(t, setErr(s.SetPartitions(ctx, g, store.PartitionSet{Partitions: []store.Partition{{ID: "a"}, {ID: "b"}, {ID: "c"}}})), "SetPartitions")
	id, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession")
	oa, err := store.Claim(ctx, s, g, "a", id)
	must(t, err, "Claim a")

	long := strings.Repeat("L", 3*store.MaxIDLength)
	must(t, raw.HSet(ctx, k.owners, "b", "garbage").Err(), "HSET owners b")
	must(t, raw.HSet(ctx, k.owners, "zero", "0::").Err(), "HSET owners zero") // what Restore at epoch 0 wrote
	must(t, raw.HSet(ctx, k.owners, "ctl\nid", "5::").Err(), "HSET owners ctl")
	must(t, raw.HSet(ctx, k.owners, long, "5::").Err(), "HSET owners long")
	must(t, raw.HSet(ctx, k.owners, "badsess", "5:a\x01b:m").Err(), "HSET owners badsess")
	must(t, raw.HSet(ctx, k.partitions, "heavy", "a lot").Err(), "HSET partitions heavy")
	must(t, raw.HSet(ctx, k.partitions, "ctl\tp", "1").Err(), "HSET partitions ctl")
	// The partitions hash is read when a version before partlist wrote the
	// set (partset "1"); this version reads partlist (see partlist.go).
	must(t, raw.Set(ctx, k.partset, "1", 0).Err(), "SET partset")
	ghost, badmeta := strings.Repeat("G", 26), strings.Repeat("B", 26)
	must(t, raw.ZAdd(ctx, k.sessions, redisZ(9e15, ghost)).Err(), "ZADD ghost") // no member record
	must(t, raw.ZAdd(ctx, k.sessions, redisZ(9e15, badmeta)).Err(), "ZADD badmeta")
	must(t, raw.HSet(ctx, k.members, badmeta, "heavy:m").Err(), "HSET members badmeta")
	// A session added by hand, with a well-formed member record: no member
	// opened it, so none must give it partitions it would never claim.
	must(t, raw.ZAdd(ctx, k.sessions, redisZ(9e15, "by-hand")).Err(), "ZADD by-hand")
	must(t, raw.HSet(ctx, k.members, "by-hand", "1:by-hand").Err(), "HSET members by-hand")
	if len(id) != 26 || !store.IsSessionID(id) || store.IsSessionID(strings.ToLower(id)) {
		t.Fatalf("store.IsSessionID does not recognise the session id %q the store made, or accepts its lower case", id)
	}

	snap, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot with malformed records")
	wantMalformed(t, snap, store.MalformedOwnership, "b", k.owners)
	wantMalformed(t, snap, store.MalformedOwnership, "zero", k.owners)
	wantMalformed(t, snap, store.MalformedOwnership, "ctl\nid", k.owners)
	wantMalformed(t, snap, store.MalformedOwnership, long, k.owners)
	wantMalformed(t, snap, store.MalformedOwnership, "badsess", k.owners)
	wantMalformed(t, snap, store.MalformedPartition, "heavy", k.partitions)
	wantMalformed(t, snap, store.MalformedPartition, "ctl\tp", k.partitions)
	wantMalformed(t, snap, store.MalformedSession, ghost, k.members)
	wantMalformed(t, snap, store.MalformedSession, badmeta, k.members)
	wantMalformed(t, snap, store.MalformedSession, "by-hand", k.sessions)
	if len(snap.Malformed) != 10 {
		t.Fatalf("snapshot lists %d malformed records %+v; want 10", len(snap.Malformed), snap.Malformed)
	}
	for i := 1; i < len(snap.Malformed); i++ {
		a, b := snap.Malformed[i-1], snap.Malformed[i]
		if a.Kind > b.Kind || a.Kind == b.Kind && a.ID >= b.ID {
			t.Fatalf("Malformed is not sorted by kind then id: %+v", snap.Malformed)
		}
	}
	for _, m := range snap.Malformed {
		if len(m.ID) > store.MaxIDLength {
			t.Fatalf("malformed id of %d bytes; want at most %d", len(m.ID), store.MaxIDLength)
		}
	}
	// Everything else reads as before.
	if !snap.Alive(id) || len(snap.Sessions) != 1 {
		t.Fatalf("sessions %+v; want only %q", snap.Sessions, id)
	}
	if got := fmtParts(snap.Partitions); got != "a b c" {
		t.Fatalf("partitions %q; want a b c", got)
	}
	if len(snap.Owners) != 1 || snap.Owners[0].Partition != "a" || snap.Owners[0].Epoch != oa.Epoch {
		t.Fatalf("owners %+v; want only a's record at epoch %d", snap.Owners, oa.Epoch)
	}
	// The other partitions still work; the malformed one is refused, not
	// overwritten.
	_, err = store.Claim(ctx, s, g, "c", id)
	must(t, err, "Claim of c next to malformed records")
	_, err = store.Claim(ctx, s, g, "b", id)
	wantIs(t, err, store.ErrCorrupt, "Claim of b, whose record is malformed")
	if v, _ := raw.HGet(ctx, k.owners, "b").Result(); v != "garbage" {
		t.Fatalf("the malformed record of b became %q; want it left as it was", v)
	}
}

// TestWrongTypeKeyIsCorrupt: a whole key of the wrong type is a fault of the
// group, not of one record: every call, Snapshot included, reports
// ErrCorrupt (and members back off), and nothing is overwritten.
func TestWrongTypeKeyIsCorrupt(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "wrongtype"
	k := s.keys(g)
	id, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession")
	must(t, raw.Set(ctx, k.owners, "a string", 0).Err(), "SET owners")
	_, err = s.Snapshot(ctx, g)
	wantIs(t, err, store.ErrCorrupt, "Snapshot with a string owners key")
	_, err = store.Claim(ctx, s, g, "p", id)
	wantIs(t, err, store.ErrCorrupt, "Claim with a string owners key")
	if v, _ := raw.Get(ctx, k.owners).Result(); v != "a string" {
		t.Fatalf("the owners key became %q; want it left as it was", v)
	}
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

func fmtParts(ps []store.Partition) string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return strings.Join(ids, " ")
}

// TestFailoverBringsBackOwnRecord: a failover to a replica that missed the
// last writes brings back a record naming A's session at A's old epoch e1,
// after B had claimed the partition at e2 (on the old primary). A, which
// handed the partition to B and does not run it, claims it again: it must
// get an epoch above e2, never e1 again, so that B's epoch and A's old one
// are both fenced. (Before, Claim answered "already yours" with e1, and A
// ran the partition at e1 a second time.)
func TestFailoverBringsBackOwnRecord(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "failover"
	k := s.keys(g)
	a, err := s.OpenSession(ctx, g, "a", 1, time.Minute)
	must(t, err, "OpenSession a")
	b, err := s.OpenSession(ctx, g, "b", 1, time.Minute)
	must(t, err, "OpenSession b")
	o1, err := store.Claim(ctx, s, g, "p", a)
	must(t, err, "Claim by a")
	replica, err := raw.HGet(ctx, k.owners, "p").Result() // what the replica last received
	must(t, err, "HGET")
	must(t, store.Release(ctx, s, g, "p", a, o1.Epoch), "Release by a")
	o2, err := store.Claim(ctx, s, g, "p", b)
	must(t, err, "Claim by b")
	must(t, raw.HSet(ctx, k.owners, "p", replica).Err(), "HSET: the failover")

	o3, err := store.Claim(ctx, s, g, "p", a)
	must(t, err, "Claim by a after the failover")
	if o3.Epoch <= o2.Epoch {
		t.Fatalf("a claimed its own record brought back by the failover at epoch %d; want above b's %d (a had %d)", o3.Epoch, o2.Epoch, o1.Epoch)
	}
	wantIs(t, s.Checkpoint(ctx, g, "p", o1.Epoch, []byte("x")), store.ErrNotOwner, "Checkpoint at a's old epoch")
}
