package storetest

import (
	"errors"

	"github.com/herdhq/herd/store"
)

// fillGroup gives the env's group a partition set, a claimed partition with
// a checkpoint and a released one, and returns the live session.
func (e *env) fillGroup() string {
	e.t.Helper()
	e.setPartitions("a", "b")
	s := e.open("m1", longTTL)
	a := e.claim("a", s)
	e.checkpoint("a", a.Epoch, "pos-a")
	b := e.claim("b", s)
	e.release("b", s, b.Epoch)
	e.report(s, store.Load{Partition: "a", Load: 2}, store.Load{Partition: "b", Load: 1})
	return s
}

// wantEmpty fails the test unless the group has no session, partition or
// record.
func (e *env) wantEmpty(why string) {
	e.t.Helper()
	s := e.snap()
	if len(s.Sessions)+len(s.Partitions)+len(s.Owners)+len(s.Loads) > 0 || s.PartitionSetStored {
		e.t.Fatalf("%s: Snapshot has %d sessions, %d partitions, %d records, %d loads, partition set stored %v; want an empty group",
			why, len(s.Sessions), len(s.Partitions), len(s.Owners), len(s.Loads), s.PartitionSetStored)
	}
}

// DeleteGroup without live sessions removes everything, leaves other groups
// alone, and is harmless when repeated; the group can be used again, with
// epochs above the deleted ones.
func testDeleteGroup(e *env) {
	other := newGroup(e.t, "-other")
	os := e.openIn(other, "m9", 1, longTTL)
	e.claimIn(other, "x", os)

	s := e.fillGroup()
	old := e.mustRecord("a")
	e.close(s)
	if err := e.s.DeleteGroup(e.ctx, e.group, false); err != nil {
		e.t.Fatalf("DeleteGroup(%q, force false) with no live session: %v; want nil", e.group, err)
	}
	e.wantEmpty("after DeleteGroup")
	if err := e.s.DeleteGroup(e.ctx, e.group, false); err != nil {
		e.t.Fatalf("DeleteGroup of a group already deleted: %v; want nil", err)
	}
	if o := e.snapOf(other); len(o.Sessions) != 1 || len(o.Owners) != 1 {
		e.t.Fatalf("DeleteGroup(%q) changed group %q: %d sessions, %d records; want 1 and 1", e.group, other, len(o.Sessions), len(o.Owners))
	}

	s2 := e.open("m2", longTTL)
	o := e.claim("a", s2)
	if o.Epoch <= old.Epoch || o.Checkpoint != nil {
		e.t.Fatalf("Claim after DeleteGroup returned %s; want a fresh record (no checkpoint) with an epoch above the deleted %d", fmtOwner(o), old.Epoch)
	}
}

// DeleteGroup refuses while a session is alive and then deletes nothing;
// with force it deletes the live sessions too.
func testDeleteGroupInUse(e *env) {
	s := e.fillGroup()
	before := e.snap()
	err := e.s.DeleteGroup(e.ctx, e.group, false)
	wantErr(e.t, err, store.ErrGroupInUse, "DeleteGroup(force false) with a live session", "a live member still uses the group")
	after := e.snap()
	if len(after.Sessions) != len(before.Sessions) || len(after.Partitions) != len(before.Partitions) || len(after.Owners) != len(before.Owners) {
		e.t.Fatalf("a refused DeleteGroup changed the group: %d/%d/%d sessions/partitions/records, was %d/%d/%d",
			len(after.Sessions), len(after.Partitions), len(after.Owners), len(before.Sessions), len(before.Partitions), len(before.Owners))
	}
	e.wantCheckpoint("a", s, "pos-a", "after a refused DeleteGroup")

	if err := e.s.DeleteGroup(e.ctx, e.group, true); err != nil {
		e.t.Fatalf("DeleteGroup(force true) with a live session: %v; want nil", err)
	}
	e.wantEmpty("after a forced DeleteGroup")
	err = keepErr(e.s.KeepAlive(e.ctx, e.group, s, longTTL))
	wantErr(e.t, err, store.ErrSessionExpired, "KeepAlive of a session deleted with its group", "the session is gone")
}

// Expired sessions do not keep a group in use.
func testDeleteGroupExpired(e *env) {
	e.setPartitions("a")
	s := e.open("m1", shortTTL)
	e.claim("a", s)
	e.waitGone(s, shortTTL+expiryGrace)
	if err := e.s.DeleteGroup(e.ctx, e.group, false); err != nil {
		e.t.Fatalf("DeleteGroup(force false) after the only session expired: %v; want nil", err)
	}
	e.wantEmpty("after DeleteGroup")
}

// A malformed group id is rejected with ErrInvalid.
func testDeleteGroupInvalid(e *env) {
	for _, g := range malformedIDs() {
		err := e.s.DeleteGroup(e.ctx, g, true)
		if !errors.Is(err, store.ErrInvalid) {
			e.t.Fatalf("DeleteGroup(%s): %v; want ErrInvalid", quote(g), err)
		}
	}
}
