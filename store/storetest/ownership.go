package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/herdhq/herd/store"
)

// testClaimFree: a partition without a record is claimed with an epoch > 0
// and no checkpoint; the snapshot shows the record.
func testClaimFree(e *env) {
	t := e.t
	e.setPartitions("p1")
	a := e.open("member-a", longTTL)
	o := e.claim("p1", a)
	if o.Member != "member-a" || len(o.Checkpoint) != 0 {
		t.Fatalf("Claim of a new partition returned %s; want Member %q and no checkpoint", fmtOwner(o), "member-a")
	}
	got := e.mustRecord("p1")
	if !sameOwner(got, o) {
		t.Fatalf("Snapshot record %s differs from what Claim returned %s; want them equal", fmtOwner(got), fmtOwner(o))
	}
}

// testClaimHeld: a partition owned by another live session is not claimed.
func testClaimHeld(e *env) {
	t := e.t
	a := e.open("member-a", longTTL)
	b := e.open("member-b", longTTL)
	o := e.claim("p1", a)
	_, err := store.Claim(e.ctx, e.s, e.group, "p1", b)
	wantErr(t, err, store.ErrClaimed, "Claim by a second session of a partition owned by a live session",
		"only one live session may own a partition")
	if got := e.mustRecord("p1"); !sameOwner(got, o) {
		t.Fatalf("a refused Claim changed the record from %s to %s; want it unchanged", fmtOwner(o), fmtOwner(got))
	}
}

// testClaimByOwner: a session claiming a record that already names it gets
// a fresh, larger epoch and the current checkpoint; the record's old epoch is
// fenced from then on. The caller may not be running the partition at the old
// epoch (a Claim whose reply was lost, or a record brought back by a failover
// to a replica that missed later writes), so it must never be handed back:
// a member must run a partition only at the newest epoch it could know of.
// A retried Claim is still harmless: the caller runs the newest epoch.
func testClaimByOwner(e *env) {
	t := e.t
	a := e.open("member-a", longTTL)
	o := e.claim("p1", a)
	e.checkpoint("p1", o.Epoch, "progress")
	again := e.claim("p1", a)
	if again.Epoch <= o.Epoch {
		t.Fatalf("Claim by the session that already owns the partition at epoch %d returned epoch %d; want a fresh, larger epoch", o.Epoch, again.Epoch)
	}
	if string(again.Checkpoint) != "progress" || again.Member != "member-a" {
		t.Fatalf("Claim by the owning session returned %s; want Member %q and the current checkpoint %q", fmtOwner(again), "member-a", "progress")
	}
	if got := e.mustRecord("p1"); got.Epoch != again.Epoch || got.Session != a {
		t.Fatalf("record after a repeated Claim is %s; want session %q at the new epoch %d", fmtOwner(got), a, again.Epoch)
	}
	err := e.s.Checkpoint(e.ctx, e.group, "p1", o.Epoch, []byte("stale"))
	wantErr(t, err, store.ErrNotOwner, "Checkpoint at the epoch the owner held before claiming again", "the old epoch is fenced")
	err = store.Release(e.ctx, e.s, e.group, "p1", a, o.Epoch)
	wantErr(t, err, store.ErrNotOwner, "Release at the epoch the owner held before claiming again", "the old epoch is fenced")
	// The new epoch is current: the owner goes on writing and releases.
	e.checkpoint("p1", again.Epoch, "more")
	e.release("p1", a, again.Epoch)
}

// testClaimNeedsLiveSession: Claim by a closed or unknown session fails
// with ErrSessionExpired and creates no record.
func testClaimNeedsLiveSession(e *env) {
	t := e.t
	a := e.open("member-a", longTTL)
	e.close(a)
	_, err := store.Claim(e.ctx, e.s, e.group, "p1", a)
	wantErr(t, err, store.ErrSessionExpired, "Claim by a closed session", "only a live session may claim")
	_, err = store.Claim(e.ctx, e.s, e.group, "p1", "no-such-session")
	wantErr(t, err, store.ErrSessionExpired, "Claim by an unknown session", "only a live session may claim")
	if o, ok := e.record("p1"); ok && o.Session != "" {
		t.Fatalf("refused Claims left a record naming a session: %s; want none", fmtOwner(o))
	}
}

// testClaimAfterClose: when the owner closes its session, the record is free;
// the next Claim gets a larger epoch and the checkpoint carries over.
func testClaimAfterClose(e *env) {
	t := e.t
	a := e.open("member-a", longTTL)
	b := e.open("member-b", longTTL)
	oa := e.claim("p1", a)
	e.checkpoint("p1", oa.Epoch, "cp-from-a")
	e.close(a)
	ob := e.claim("p1", b)
	if ob.Epoch <= oa.Epoch {
		t.Fatalf("Claim after the owner closed its session got epoch %d; want strictly more than the previous %d", ob.Epoch, oa.Epoch)
	}
	if string(ob.Checkpoint) != "cp-from-a" || ob.Member != "member-b" {
		t.Fatalf("Claim after the owner closed returned %s; want Member %q and the previous checkpoint %q", fmtOwner(ob), "member-b", "cp-from-a")
	}
	if got := e.mustRecord("p1"); !sameOwner(got, ob) {
		t.Fatalf("record after the takeover is %s; want %s", fmtOwner(got), fmtOwner(ob))
	}
	// The previous owner's epoch is fenced off.
	err := e.s.Checkpoint(e.ctx, e.group, "p1", oa.Epoch, []byte("stale"))
	wantErr(t, err, store.ErrNotOwner, "Checkpoint with the previous owner's epoch", "the epoch is stale")
	e.wantCheckpoint("p1", b, "cp-from-a", "after a refused stale Checkpoint")
}

// testClaimAfterExpiry: when the owner's session expires, its fenced writes
// fail, it can no longer claim, and another session takes the partition with
// a larger epoch and the checkpoint.
func testClaimAfterExpiry(e *env) {
	t := e.t
	b := e.open("member-b", longTTL)
	a := e.open("member-a", shortTTL)
	oa := e.claim("p1", a)
	e.checkpoint("p1", oa.Epoch, "cp-from-a")
	oa2 := e.claim("p2", a)

	// While a is alive, b cannot take it.
	if _, err := store.Claim(e.ctx, e.s, e.group, "p1", b); !errors.Is(err, store.ErrClaimed) && e.snap().Alive(a) {
		t.Fatalf("Claim by b of a partition owned by live session a: %v; want ErrClaimed", err)
	}
	e.waitGone(a, shortTTL+expiryGrace)

	err := e.s.Checkpoint(e.ctx, e.group, "p1", oa.Epoch, []byte("late"))
	wantErr(t, err, store.ErrNotOwner, "Checkpoint by the owner after its session expired",
		"Checkpoint is fenced on the owning session being alive")
	err = store.Release(e.ctx, e.s, e.group, "p2", a, oa2.Epoch)
	wantErr(t, err, store.ErrNotOwner, "Release by the owner after its session expired",
		"Release is fenced on the owning session being alive")
	wantErr(t, keepErr(e.s.KeepAlive(e.ctx, e.group, a, time.Second)), store.ErrSessionExpired,
		"KeepAlive of the expired owner", "the session is dead")
	_, err = store.Claim(e.ctx, e.s, e.group, "p3", a)
	wantErr(t, err, store.ErrSessionExpired, "Claim by an expired session", "only a live session may claim")

	ob := e.claim("p1", b)
	if ob.Epoch <= oa.Epoch {
		t.Fatalf("Claim after the owner expired got epoch %d; want strictly more than %d", ob.Epoch, oa.Epoch)
	}
	if string(ob.Checkpoint) != "cp-from-a" {
		t.Fatalf("Claim after the owner expired (and refused its late Checkpoint) returned checkpoint %q; want the previous %q", ob.Checkpoint, "cp-from-a")
	}
	ob2 := e.claim("p2", b)
	if ob2.Epoch <= oa2.Epoch {
		t.Fatalf("Claim of p2 after the owner expired got epoch %d; want strictly more than %d", ob2.Epoch, oa2.Epoch)
	}
}

// testCheckpointCurrent: the owner writes with its epoch; every write
// replaces the previous value, and the next Claim returns it.
func testCheckpointCurrent(e *env) {
	a := e.open("member-a", longTTL)
	o := e.claim("p1", a)
	for i := range 3 {
		v := fmt.Sprintf("offset-%d", i)
		e.checkpoint("p1", o.Epoch, v)
		e.checkpoint("p1", o.Epoch, v+"-again")
		if got := e.mustRecord("p1"); got.Epoch != o.Epoch || got.Session != a {
			e.t.Fatalf("Checkpoint changed the record to %s; want epoch %d and session %q kept", fmtOwner(got), o.Epoch, a)
		}
		o = e.wantCheckpoint("p1", a, v+"-again", "after Checkpoints by the owner")
	}
	// Binary values survive unchanged.
	bin := []byte{0, 1, 2, 0xff, 0xfe, '\n', '"', '%', 0}
	if err := e.s.Checkpoint(e.ctx, e.group, "p1", o.Epoch, bin); err != nil {
		e.t.Fatalf("Checkpoint of binary bytes: %v; want nil", err)
	}
	e.wantCheckpoint("p1", a, string(bin), "after a binary Checkpoint")
}

// testCheckpointFenced: stale epochs, unknown records, released records.
func testCheckpointFenced(e *env) {
	t := e.t
	a := e.open("member-a", longTTL)
	b := e.open("member-b", longTTL)

	err := e.s.Checkpoint(e.ctx, e.group, "never-claimed", 1, []byte("x"))
	wantErr(t, err, store.ErrNotOwner, "Checkpoint of a partition without a record", "nobody owns it")
	if o, ok := e.record("never-claimed"); ok {
		t.Fatalf("a refused Checkpoint created the record %s; want nothing written", fmtOwner(o))
	}

	oa := e.claim("p1", a)
	e.checkpoint("p1", oa.Epoch, "a-1")
	for _, epoch := range []uint64{oa.Epoch - 1, oa.Epoch + 1} { // epoch 0 is ErrInvalid: invalid.go
		err := e.s.Checkpoint(e.ctx, e.group, "p1", epoch, []byte("wrong"))
		wantErr(t, err, store.ErrNotOwner, fmt.Sprintf("Checkpoint with epoch %d when the record's epoch is %d", epoch, oa.Epoch),
			"the epoch must equal the record's")
	}
	oa = e.wantCheckpoint("p1", a, "a-1", "after refused Checkpoints with wrong epochs")

	// After a release, the old epoch is not accepted even though nobody else
	// owns the partition yet.
	e.release("p1", a, oa.Epoch)
	err = e.s.Checkpoint(e.ctx, e.group, "p1", oa.Epoch, []byte("after-release"))
	wantErr(t, err, store.ErrNotOwner, "Checkpoint after Release", "a released record has no live session")

	// b takes over with a's last checkpoint; a's epoch stays refused and
	// b's works.
	ob := e.wantCheckpoint("p1", b, "a-1", "after a refused Checkpoint on a released record")
	err = e.s.Checkpoint(e.ctx, e.group, "p1", oa.Epoch, []byte("stale"))
	wantErr(t, err, store.ErrNotOwner, "Checkpoint with the previous owner's epoch", "the epoch is stale")
	e.checkpoint("p1", ob.Epoch, "b-1")
	e.wantCheckpoint("p1", b, "b-1", "after Checkpoint by the new owner")
}

// testCheckpointLimit: MaxCheckpointLength bytes are accepted, one more is
// ErrInvalid and nothing is written.
func testCheckpointLimit(e *env) {
	t := e.t
	a := e.open("member-a", longTTL)
	o := e.claim("p1", a)
	big := bytes.Repeat([]byte{'c'}, store.MaxCheckpointLength)
	if err := e.s.Checkpoint(e.ctx, e.group, "p1", o.Epoch, big); err != nil {
		t.Fatalf("Checkpoint of exactly MaxCheckpointLength (%d) bytes: %v; want nil", len(big), err)
	}
	o = e.claim("p1", a)
	if !bytes.Equal(o.Checkpoint, big) {
		t.Fatalf("checkpoint of %d bytes read back as %d bytes; want it unchanged", len(big), len(o.Checkpoint))
	}
	e.checkpoint("p1", o.Epoch, "small")
	err := e.s.Checkpoint(e.ctx, e.group, "p1", o.Epoch, append(big, 'x'))
	wantErr(t, err, store.ErrInvalid, fmt.Sprintf("Checkpoint of %d bytes", len(big)+1),
		fmt.Sprintf("the limit is MaxCheckpointLength = %d", store.MaxCheckpointLength))
	e.wantCheckpoint("p1", a, "small", "after a refused oversized Checkpoint")
}

// testReleaseFenced: Release needs the record's session and epoch, and the
// session alive.
func testReleaseFenced(e *env) {
	t := e.t
	a := e.open("member-a", longTTL)
	b := e.open("member-b", longTTL)
	err := store.Release(e.ctx, e.s, e.group, "never-claimed", a, 1)
	wantErr(t, err, store.ErrNotOwner, "Release of a partition without a record", "nobody owns it")

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
		err := store.Release(e.ctx, e.s, e.group, "p1", c.session, c.epoch)
		wantErr(t, err, store.ErrNotOwner, fmt.Sprintf("Release(session %q, epoch %d) of a record owned by %q at epoch %d", c.session, c.epoch, a, o.Epoch), c.why)
		if got := e.mustRecord("p1"); !sameOwner(got, o) {
			t.Fatalf("a refused Release changed the record from %s to %s; want it unchanged", fmtOwner(o), fmtOwner(got))
		}
	}

	// A closed owner cannot release either.
	o2 := e.claim("p2", a)
	e.close(a)
	err = store.Release(e.ctx, e.s, e.group, "p2", a, o2.Epoch)
	wantErr(t, err, store.ErrNotOwner, "Release by a closed session", "the owning session must be alive")
}

// testReleaseKeeps: Release clears Session and Member, keeps epoch and
// checkpoint, and a second Release fails.
func testReleaseKeeps(e *env) {
	t := e.t
	a := e.open("member-a", longTTL)
	b := e.open("member-b", longTTL)
	o := e.claim("p1", a)
	e.checkpoint("p1", o.Epoch, "kept")
	e.release("p1", a, o.Epoch)
	got := e.mustRecord("p1")
	want := store.Ownership{Partition: "p1", Epoch: o.Epoch}
	if !sameOwner(got, want) {
		t.Fatalf("record after Release is %s; want %s (session and member cleared, epoch kept)", fmtOwner(got), fmtOwner(want))
	}
	err := store.Release(e.ctx, e.s, e.group, "p1", a, o.Epoch)
	wantErr(t, err, store.ErrNotOwner, "a second Release", "the record is already released")
	// A released record names no session; naming none must not match it.
	err = store.Release(e.ctx, e.s, e.group, "p1", "", o.Epoch)
	if !errors.Is(err, store.ErrNotOwner) && !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Release with an empty session of a released record: %v; want ErrNotOwner (or ErrInvalid)", err)
	}
	if !e.snap().Alive(a) {
		t.Fatalf("session %q died by releasing a partition; want it alive", a)
	}
	ob := e.claim("p1", b)
	if ob.Epoch <= o.Epoch || string(ob.Checkpoint) != "kept" {
		t.Fatalf("Claim after Release returned %s; want an epoch above %d and checkpoint %q", fmtOwner(ob), o.Epoch, "kept")
	}
}

// testEpochsIncrease: across many claim/release/close cycles, among several
// sessions, including the same session re-claiming what it released, every
// Claim gets a strictly larger epoch.
func testEpochsIncrease(e *env) {
	t := e.t
	sessions := []string{e.open("m0", longTTL), e.open("m1", longTTL), e.open("m2", longTTL)}
	var last uint64
	for i := range 60 {
		k := i % len(sessions)
		if i%7 == 3 {
			k = (i - 1) % len(sessions) // the previous owner claims again
		}
		o := e.claim("p1", sessions[k])
		if o.Epoch <= last {
			t.Fatalf("cycle %d: Claim got epoch %d after an epoch of %d; want strictly increasing epochs", i, o.Epoch, last)
		}
		last = o.Epoch
		if i%5 == 4 {
			// End the session instead of releasing, and replace it.
			e.close(sessions[k])
			sessions[k] = e.open(fmt.Sprintf("m%d-%d", k, i), longTTL)
		} else {
			e.release("p1", sessions[k], o.Epoch)
		}
	}
}
