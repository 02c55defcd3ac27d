package storetest

import (
	"fmt"

	"github.com/herdhq/herd/store"
)

// GiveBack (store.Store.GiveBack): fenced as Release is; the record's
// GivenBack mark is shown by Snapshot, Claim and Records, kept through releases,
// claims by other sessions and the end of the giver's session, cleared by
// the giver's own claim (Claim or ClaimBatch) and by Restore; the log
// carries it, so a replica shows the same marks.

// testGiveBackFenced: GiveBack succeeds only where Release would, and a
// refused GiveBack changes nothing and sets no mark.
func testGiveBackFenced(e *env) {
	t := e.t
	a := e.open("member-a", longTTL)
	b := e.open("member-b", longTTL)
	err := e.s.GiveBack(e.ctx, e.group, "never-claimed", a, 1)
	wantErr(t, err, store.ErrNotOwner, "GiveBack of a partition without a record", "nobody owns it")

	o := e.claim("p1", a)
	cases := []struct {
		session string
		epoch   uint64
		why     string
	}{
		{a, o.Epoch + 1, "the epoch is not the record's"},
		{a, o.Epoch - 1, "the epoch is not the record's"},
		{b, o.Epoch, "the session is not the record's"},
		{"no-such-session", o.Epoch, "the session is not the record's"},
	}
	for _, c := range cases {
		err := e.s.GiveBack(e.ctx, e.group, "p1", c.session, c.epoch)
		wantErr(t, err, store.ErrNotOwner, fmt.Sprintf("GiveBack(session %q, epoch %d) of a record owned by %q at epoch %d", c.session, c.epoch, a, o.Epoch), c.why)
		if got := e.mustRecord("p1"); !sameOwner(got, o) || got.GivenBack != "" {
			t.Fatalf("a refused GiveBack changed the record from %s to %s; want it unchanged, without a mark", fmtOwner(o), fmtOwner(got))
		}
	}

	// A released record cannot be given back, not even by its last owner.
	e.release("p1", a, o.Epoch)
	err = e.s.GiveBack(e.ctx, e.group, "p1", a, o.Epoch)
	wantErr(t, err, store.ErrNotOwner, "GiveBack of a released record by its last owner", "the record names no session")
	if got := e.mustRecord("p1"); got.GivenBack != "" {
		t.Fatalf("a refused GiveBack of a released record left the mark %q; want none", got.GivenBack)
	}

	// A closed owner cannot give back either.
	o2 := e.claim("p2", a)
	e.close(a)
	err = e.s.GiveBack(e.ctx, e.group, "p2", a, o2.Epoch)
	wantErr(t, err, store.ErrNotOwner, "GiveBack by a closed session", "the owning session must be alive")
	if got := e.mustRecord("p2"); got.GivenBack != "" {
		t.Fatalf("a refused GiveBack by a closed session left the mark %q; want none", got.GivenBack)
	}
}

// testGiveBackMark follows one partition's mark through GiveBack, claims
// and releases by other sessions, the giver's own claim and Restore, and
// checks the log against the snapshots.
func testGiveBackMark(e *env) {
	t := e.t
	a := e.open("member-a", longTTL)
	b := e.open("member-b", longTTL)
	c := e.open("member-c", longTTL)
	e.setPartitions("p", "q")
	from := e.snap()

	o := e.claim("p", a)
	if o.GivenBack != "" {
		t.Fatalf("Claim of a partition never given back returned GivenBack %q; want none", o.GivenBack)
	}
	e.checkpoint("p", o.Epoch, "progress")
	if err := e.s.GiveBack(e.ctx, e.group, "p", a, o.Epoch); err != nil {
		t.Fatalf("GiveBack by the owner at its epoch: %v; want nil", err)
	}
	got := e.mustRecord("p")
	if got.Session != "" || got.Member != "" || got.Epoch != o.Epoch || got.GivenBack != a {
		t.Fatalf("record after GiveBack: %s; want released at epoch %d with GivenBack %q", fmtOwner(got), o.Epoch, a)
	}
	v := e.snap().Version
	cs := e.readLog(from.Version, v)
	if last := cs[len(cs)-1]; last.Kind != store.Released || last.Partition != "p" || last.Session != a || last.Epoch != o.Epoch || last.GivenBack != a {
		t.Fatalf("last entry after GiveBack: %+v; want Released p by %q at epoch %d with GivenBack %q", last, a, o.Epoch, a)
	}
	for _, c := range cs[:len(cs)-1] {
		if c.GivenBack != "" {
			t.Fatalf("entry %+v carries GivenBack; want it only on the Released entry of a GiveBack", c)
		}
	}

	// Records shows the mark too (herd status reads it there).
	if rs := e.records("p"); len(rs) != 1 || rs[0].GivenBack != a || rs[0].Session != "" {
		t.Fatalf("Records(p) after GiveBack: %+v; want the released record with GivenBack %q", rs, a)
	}

	// Another session's claim keeps the mark, and gets the checkpoint.
	ob := e.wantCheckpoint("p", b, "progress", "GiveBack keeps the checkpoint")
	if ob.GivenBack != a {
		t.Fatalf("Claim by another session of a partition given back by %q returned GivenBack %q; want the mark kept", a, ob.GivenBack)
	}
	if got := e.mustRecord("p"); got.Session != b || got.GivenBack != a {
		t.Fatalf("record after another session's claim: %s; want owned by %q with GivenBack %q", fmtOwner(got), b, a)
	}
	if rs := e.records("p"); len(rs) != 1 || rs[0].GivenBack != a || rs[0].Session != b {
		t.Fatalf("Records(p) after another session's claim: %+v; want owned by %q with GivenBack %q", rs, b, a)
	}
	// A plain release keeps it, and so does a batch claim by another session.
	e.release("p", b, ob.Epoch)
	if got := e.mustRecord("p"); got.GivenBack != a {
		t.Fatalf("record after a plain Release: %s; want GivenBack %q kept", fmtOwner(got), a)
	}
	rs, err := e.s.ClaimBatch(e.ctx, e.group, c, []string{"p", "q"})
	if err != nil || len(rs) != 2 || rs[0].Err != nil || rs[1].Err != nil {
		t.Fatalf("ClaimBatch(p, q) by a third session: %v, %v; want both claimed", rs, err)
	}
	if rs[0].Ownership.GivenBack != a || rs[1].Ownership.GivenBack != "" {
		t.Fatalf("ClaimBatch by another session returned marks %q and %q; want %q kept on p and none on q", rs[0].Ownership.GivenBack, rs[1].Ownership.GivenBack, a)
	}
	// The mark outlives the giver's session in the record (it is then moot:
	// readers check that the session is alive).
	e.close(a)
	if got := e.mustRecord("p"); got.GivenBack != a {
		t.Fatalf("record after the giver's session closed: %s; want GivenBack %q kept (the log does not clear it)", fmtOwner(got), a)
	}

	// A new GiveBack replaces the mark; the giver's own claim clears it.
	if err := e.s.GiveBack(e.ctx, e.group, "p", c, rs[0].Ownership.Epoch); err != nil {
		t.Fatalf("GiveBack by the third session: %v", err)
	}
	if got := e.mustRecord("p"); got.GivenBack != c {
		t.Fatalf("record after a second GiveBack: %s; want GivenBack %q", fmtOwner(got), c)
	}
	oc := e.claim("p", c)
	if oc.GivenBack != "" {
		t.Fatalf("Claim by the session that gave the partition back returned GivenBack %q; want the mark cleared", oc.GivenBack)
	}
	if got := e.mustRecord("p"); got.GivenBack != "" {
		t.Fatalf("record after the giver's own claim: %s; want no mark", fmtOwner(got))
	}
	if rs := e.records("p"); len(rs) != 1 || rs[0].GivenBack != "" {
		t.Fatalf("Records(p) after the giver's own claim: %+v; want no mark", rs)
	}
	// The giver's batch claim clears it too.
	if err := e.s.GiveBack(e.ctx, e.group, "p", c, oc.Epoch); err != nil {
		t.Fatalf("GiveBack: %v", err)
	}
	rs, err = e.s.ClaimBatch(e.ctx, e.group, c, []string{"p"})
	if err != nil || len(rs) != 1 || rs[0].Err != nil || rs[0].Ownership.GivenBack != "" {
		t.Fatalf("ClaimBatch by the giver: %v, %v; want p claimed without a mark", rs, err)
	}
	if got := e.mustRecord("p"); got.GivenBack != "" {
		t.Fatalf("record after the giver's batch claim: %s; want no mark", fmtOwner(got))
	}

	// Restore over a given-back record with a lower epoch leaves no mark.
	if err := e.s.GiveBack(e.ctx, e.group, "p", c, rs[0].Ownership.Epoch); err != nil {
		t.Fatalf("GiveBack: %v", err)
	}
	if err := e.s.Restore(e.ctx, e.group, "p", rs[0].Ownership.Epoch+5, []byte("restored")); err != nil {
		t.Fatalf("Restore over a released record with a lower epoch: %v; want success", err)
	}
	if got := e.mustRecord("p"); got.GivenBack != "" || got.Epoch != rs[0].Ownership.Epoch+5 {
		t.Fatalf("record after Restore: %s; want epoch %d and no mark", fmtOwner(got), rs[0].Ownership.Epoch+5)
	}

	to := e.snap()
	replay(t, from, to, e.readLog(from.Version, to.Version), "GiveBack, claims, releases and a restore")
}
