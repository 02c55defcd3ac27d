package storetest

import (
	"errors"
	"time"

	"github.com/herdhq/herd/store"
)

// testSessionLifecycle: open, keep alive, close; the snapshot shows the
// session with its member, weight and remaining TTL until it is closed.
func testSessionLifecycle(e *env) {
	t := e.t
	const ttl = 10 * time.Second
	id := e.openIn(e.group, "member-1", 3, ttl)

	si, ok := findSession(e.snap(), id)
	if !ok {
		t.Fatalf("Snapshot after OpenSession does not list session %q; want it alive", id)
	}
	if si.Member != "member-1" || si.Weight != 3 {
		t.Fatalf("Snapshot lists session %q with Member %q, Weight %d; want Member %q, Weight 3", id, si.Member, si.Weight, "member-1")
	}
	if si.Remaining <= 0 || si.Remaining > ttl {
		t.Fatalf("session opened with TTL %v has Remaining %v; want it in (0, %v]", ttl, si.Remaining, ttl)
	}

	const longer = 20 * time.Second
	if err := keepErr(e.s.KeepAlive(e.ctx, e.group, id, longer)); err != nil {
		t.Fatalf("KeepAlive(%q) of a live session: %v; want nil", id, err)
	}
	si, ok = findSession(e.snap(), id)
	if !ok {
		t.Fatalf("Snapshot after KeepAlive does not list session %q; want it alive", id)
	}
	// KeepAlive extends to ttl from now, so Remaining is now above the
	// original TTL (less than 10 s have passed since).
	if si.Remaining <= ttl || si.Remaining > longer {
		t.Fatalf("after KeepAlive with TTL %v, Remaining is %v; want it in (%v, %v]", longer, si.Remaining, ttl, longer)
	}

	e.close(id)
	if e.snap().Alive(id) {
		t.Fatalf("Snapshot after CloseSession(%q) still lists the session; want it gone", id)
	}
	wantErr(t, keepErr(e.s.KeepAlive(e.ctx, e.group, id, ttl)), store.ErrSessionExpired,
		"KeepAlive of a closed session", "a closed session is not alive")
	if err := e.s.CloseSession(e.ctx, e.group, id); err != nil {
		t.Fatalf("CloseSession of an already closed session: %v; want nil (closing an unknown session is not an error)", err)
	}
	if err := e.s.CloseSession(e.ctx, e.group, "no-such-session"); err != nil {
		t.Fatalf("CloseSession of a session that never existed: %v; want nil", err)
	}
}

// testSessionIDsUnique: session ids are never reused, not even for the same
// member, not even after the session is closed.
func testSessionIDsUnique(e *env) {
	t := e.t
	seen := map[string]bool{}
	var live []string
	for i := range 10 {
		id := e.open("same-member", longTTL)
		if seen[id] {
			t.Fatalf("OpenSession #%d for the same member returned id %q, already returned before; want a new id every time", i, id)
		}
		seen[id] = true
		live = append(live, id)
		if i%3 == 2 {
			// Close one so a backend that recycles freed ids is caught.
			e.close(live[0])
			live = live[1:]
		}
	}
	s := e.snap()
	checkSorted(t, s)
	if len(s.Sessions) != len(live) {
		t.Fatalf("Snapshot lists %d sessions; want the %d still open (%q)", len(s.Sessions), len(live), live)
	}
	for _, id := range live {
		si, ok := findSession(s, id)
		if !ok || si.Member != "same-member" {
			t.Fatalf("Snapshot is missing open session %q of member %q (got %+v)", id, "same-member", s.Sessions)
		}
	}
}

// testKeepAliveUnknown: KeepAlive of a session the store does not know.
func testKeepAliveUnknown(e *env) {
	t := e.t
	wantErr(t, keepErr(e.s.KeepAlive(e.ctx, e.group, "no-such-session", time.Second)), store.ErrSessionExpired,
		"KeepAlive of a session that never existed", "an unknown session is not alive")
	// A session is alive in its own group only.
	id := e.open("m", longTTL)
	other := newGroup(t, "-other")
	wantErr(t, keepErr(e.s.KeepAlive(e.ctx, other, id, time.Second)), store.ErrSessionExpired,
		"KeepAlive of a session in a group it was not opened in", "sessions belong to one group")
	if !e.snap().Alive(id) {
		t.Fatalf("session %q died after a KeepAlive naming it in another group; want it alive in its own group", id)
	}
}

// testSessionExpires: a session that is not kept alive disappears once its
// TTL has passed on the store's clock, not before.
func testSessionExpires(e *env) {
	t := e.t
	control := e.open("control", longTTL)
	start := time.Now()
	id := e.open("short-lived", shortTTL)
	if !e.snap().Alive(id) {
		// Could only happen on a terribly slow machine; say so.
		if time.Since(start) < shortTTL {
			t.Fatalf("session %q is not alive right after OpenSession with TTL %v", id, shortTTL)
		}
	}
	gone := e.waitGone(id, shortTTL+expiryGrace)
	// The store's clock started the TTL after start, so at least shortTTL
	// has passed by our clock too (10% slack for a store clock running a
	// little fast).
	if elapsed := gone.Sub(start); elapsed < shortTTL*9/10 {
		t.Fatalf("session with TTL %v expired after only %v; want no expiry before the TTL has passed", shortTTL, elapsed)
	}
	wantErr(t, keepErr(e.s.KeepAlive(e.ctx, e.group, id, shortTTL)), store.ErrSessionExpired,
		"KeepAlive of an expired session", "a session is dead once its TTL has passed without KeepAlive")
	if !e.snap().Alive(control) {
		t.Fatalf("session %q with TTL %v died together with a short-lived session; want it alive", control, longTTL)
	}
	if err := e.s.CloseSession(e.ctx, e.group, id); err != nil {
		t.Fatalf("CloseSession of an expired session: %v; want nil", err)
	}
}

// testKeepAliveExtends: KeepAlive at a fraction of the TTL keeps a session
// alive well past its first TTL; once it stops, the session expires.
//
// The TTL is short and the clock real: a round in which a renewal came
// more than nine tenths of the TTL after the last one had succeeded (the
// process stalled, as a loaded machine running the race detector can make
// it, or the store took that long to answer) shows nothing about the
// store, and the test starts over with a new session, up to three times.
func testKeepAliveExtends(e *env) {
	t := e.t
	for attempt := 1; ; attempt++ {
		id, late := keepRenewing(e)
		if late == 0 {
			e.waitGone(id, shortTTL+expiryGrace)
			return
		}
		if err := e.s.CloseSession(e.ctx, e.group, id); err != nil {
			t.Fatalf("CloseSession of a session renewed late: %v; want nil", err)
		}
		if attempt == 3 {
			t.Fatalf("KeepAlive every %v of a session with TTL %v: three rounds had a renewal %v or more after the last success; want the machine to keep up", shortTTL/5, shortTTL, late)
		}
		t.Logf("a renewal came %v after the last success, more than %v: starting over", late, shortTTL*9/10)
	}
}

// keepRenewing opens a session with TTL shortTTL and renews it every fifth
// of that for three TTLs, checking it stays alive. It fails the test if the
// session expires although every renewal came in time; late is how long
// after the last success the renewal or check that found it expired came,
// if that was too late (0: none was).
func keepRenewing(e *env) (id string, late time.Duration) {
	t := e.t
	id = e.open("renewing", shortTTL)
	lastOK := time.Now()
	end := lastOK.Add(3 * shortTTL)
	tick := time.NewTicker(shortTTL / 5)
	defer tick.Stop()
	tooLate := func() time.Duration {
		if d := time.Since(lastOK); d >= shortTTL*9/10 {
			return d.Round(time.Millisecond)
		}
		return 0
	}
	for time.Now().Before(end) {
		if err := keepErr(e.s.KeepAlive(e.ctx, e.group, id, shortTTL)); err != nil {
			if d := tooLate(); d > 0 && errors.Is(err, store.ErrSessionExpired) {
				return id, d
			}
			t.Fatalf("KeepAlive every %v of a session with TTL %v: %v; want nil (the session must stay alive)", shortTTL/5, shortTTL, err)
		}
		lastOK = time.Now()
		if !e.snap().Alive(id) {
			if d := tooLate(); d > 0 {
				return id, d
			}
			t.Fatalf("session %q renewed every %v with TTL %v is missing from the snapshot; want it alive", id, shortTTL/5, shortTTL)
		}
		select {
		case <-tick.C:
		case <-e.ctx.Done():
			t.Fatal(e.ctx.Err())
		}
	}
	return id, 0
}

// testSessionInvalidArguments: malformed OpenSession/KeepAlive arguments.
// The contract's ErrInvalid covers "an id or argument is malformed": a TTL
// that is not positive and a negative weight are malformed.
func testSessionInvalidArguments(e *env) {
	t := e.t
	for _, ttl := range []time.Duration{0, -time.Second} {
		_, err := e.s.OpenSession(e.ctx, e.group, "m", 1, ttl)
		wantErr(t, err, store.ErrInvalid, "OpenSession with TTL "+ttl.String(), "a session needs a positive TTL")
	}
	_, err := e.s.OpenSession(e.ctx, e.group, "m", -1, time.Second)
	wantErr(t, err, store.ErrInvalid, "OpenSession with weight -1", "weights are not negative")
	id := e.open("m", longTTL)
	err = keepErr(e.s.KeepAlive(e.ctx, e.group, id, 0))
	wantErr(t, err, store.ErrInvalid, "KeepAlive with TTL 0", "a session needs a positive TTL")
	if !e.snap().Alive(id) {
		t.Fatalf("session %q died after a rejected KeepAlive; want it untouched", id)
	}
	if s := e.snap(); len(s.Sessions) != 1 {
		t.Fatalf("rejected OpenSession calls left sessions behind: %+v; want only %q", s.Sessions, id)
	}
}
