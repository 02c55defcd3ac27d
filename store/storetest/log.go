package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

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
// records, PartitionSetStored and Version.
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

// testLogBlocks: Changes at the end of the log blocks until an entry is
// appended (or returns nothing, which a backend may do), returns promptly
// when its context is cancelled, and returns nothing and no error when its
// deadline comes.
func testLogBlocks(e *env) {
	t := e.t
	e.open("m", longTTL)
	v := e.snap().Version
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	began := time.Now()
	if _, _, err := e.s.Changes(ctx, e.group, v, 10); err == nil {
		t.Fatal("Changes with a cancelled context returned no error")
	}
	if d := time.Since(began); d > promptly {
		t.Fatalf("Changes with a cancelled context took %v", d)
	}
	// At rest until its deadline: no entries and no error. An error says
	// that the store did not answer in time, which a loaded machine may
	// make happen now and then: one call in three must answer.
	for try := 1; ; try++ {
		dctx, dcancel := context.WithTimeout(e.ctx, 500*time.Millisecond)
		cs, next, err := e.s.Changes(dctx, e.group, v, 10)
		dcancel()
		if len(cs) > 0 || (err == nil && next != v) {
			t.Fatalf("Changes at the end of the log until its deadline: %+v, %v, %v; want no entries and %v", cs, next, err, v)
		}
		if err == nil {
			break
		}
		if try == 3 {
			t.Fatalf("Changes at the end of the log until its deadline, three times: %v; want no entries and no error", err)
		}
	}
	type reply struct {
		cs  []store.Change
		err error
	}
	got := make(chan reply, 1)
	go func() {
		cur := v
		for {
			cs, next, err := e.s.Changes(e.ctx, e.group, cur, 10)
			if err != nil || len(cs) > 0 {
				got <- reply{cs, err}
				return
			}
			cur = next
		}
	}()
	select {
	case r := <-got:
		t.Fatalf("Changes at the end of the log returned %+v, %v before anything was written; want it to wait", r.cs, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := e.s.SetPartitions(e.ctx, e.group, store.PartitionSet{Partitions: []store.Partition{{ID: "x"}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil || len(r.cs) != 1 || r.cs[0].Kind != store.PartitionsSet || r.cs[0].Version.Seq != v.Seq+1 ||
			!slices.Equal(r.cs[0].Partitions, []store.Partition{{ID: "x"}}) {
			t.Fatalf("Changes woken by SetPartitions returned %+v, %v; want the one PartitionsSet entry %d", r.cs, r.err, v.Seq+1)
		}
	case <-time.After(eventWait):
		t.Fatalf("Changes did not return within %v of SetPartitions", eventWait)
	}
}

// testLogFull: Changes returns max entries whenever the log holds that
// many after the version asked for, whatever the writes that made them (one
// entry each or one batch of many): a call that returns fewer has read to
// the end of the log, which members rely on (store.Store.Changes).
func testLogFull(e *env) {
	t := e.t
	sess := e.open("m", longTTL)
	var ids []string
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("p%03d", i))
	}
	e.setPartitions(ids...)
	v := e.snap().Version
	for _, p := range ids[:150] {
		e.claim(p, sess) // one entry each
	}
	if _, err := e.s.ClaimBatch(e.ctx, e.group, sess, ids[150:250]); err != nil {
		t.Fatal(err)
	}
	for _, p := range ids[250:] {
		e.claim(p, sess)
	}
	head := e.snap().Version
	total := int(head.Seq - v.Seq)
	if total != len(ids) {
		t.Fatalf("300 claims moved the version from %v to %v; want 300 entries", v, head)
	}
	for _, c := range []struct {
		after, max int
	}{{0, 1000}, {0, 300}, {0, 7}, {0, 120}, {0, 160}, {140, 100}, {149, 2}, {150, 100}, {160, 1000}, {240, 30}, {299, 5}} {
		from := v
		if c.after > 0 {
			cs, next, err := e.s.Changes(e.ctx, e.group, v, c.after)
			if err != nil || len(cs) != c.after {
				t.Fatalf("Changes(after %v, max %d) returned %d entries, %v; want %d", v, c.after, len(cs), err, c.after)
			}
			from = next
		}
		want := min(c.max, total-c.after)
		cs, next, err := e.s.Changes(e.ctx, e.group, from, c.max)
		if err != nil {
			t.Fatalf("Changes(after entry %d, max %d): %v", c.after, c.max, err)
		}
		checkEntries(t, from, next, cs)
		if len(cs) != want {
			t.Fatalf("Changes(after entry %d of 300, max %d) returned %d entries; want %d (fewer than max only at the end of the log)", c.after, c.max, len(cs), want)
		}
	}
}

// testLogExpiry: a session left to expire is logged as expired exactly
// once, however many calls notice it at once; ExpireSessions and KeepAlive
// report the time until the next expiry.
func testLogExpiry(e *env) {
	t := e.t
	live := e.open("live", longTTL)
	next, err := e.s.KeepAlive(e.ctx, e.group, live, longTTL)
	if err != nil || next <= 0 || next > longTTL {
		t.Fatalf("KeepAlive of the only session returned next %v, %v; want in (0, %v]", next, err, longTTL)
	}
	v := e.snap().Version
	dying := e.open("dying", shortTTL)
	next, err = e.s.KeepAlive(e.ctx, e.group, live, longTTL)
	if err != nil || next <= 0 || next > shortTTL {
		t.Fatalf("KeepAlive with a session of TTL %v in the group returned next %v, %v; want in (0, %v]", shortTTL, next, err, shortTTL)
	}
	next, err = e.s.ExpireSessions(e.ctx, e.group)
	if err != nil || next <= 0 || next > shortTTL {
		t.Fatalf("ExpireSessions before any TTL passed returned next %v, %v; want in (0, %v]", next, err, shortTTL)
	}
	select {
	case <-time.After(shortTTL + e.opts.ExpiryLag + 50*time.Millisecond):
	case <-e.ctx.Done():
		t.Fatal(e.ctx.Err())
	}
	// Every call that may notice the expiry, at once.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			var err error
			switch i % 4 {
			case 0:
				_, err = e.s.ExpireSessions(e.ctx, e.group)
			case 1:
				err = keepErr(e.s.KeepAlive(e.ctx, e.group, live, longTTL))
			case 2:
				_, err = e.s.Snapshot(e.ctx, e.group)
			case 3:
				_, err = store.Claim(e.ctx, e.s, e.group, fmt.Sprintf("p%d", i), live)
			}
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	next, err = e.s.ExpireSessions(e.ctx, e.group)
	if err != nil || next <= shortTTL || next > longTTL {
		t.Fatalf("ExpireSessions with only the long session left returned next %v, %v; want in (%v, %v]", next, err, shortTTL, longTTL)
	}
	end := e.snap()
	if end.Alive(dying) {
		t.Fatalf("session %q is alive after its TTL", dying)
	}
	var expired, closed int
	for _, c := range e.readLog(v, end.Version) {
		switch {
		case c.Kind == store.SessionExpired && c.Session == dying:
			expired++
		case c.Kind == store.SessionExpired || c.Kind == store.SessionClosed:
			closed++
		}
	}
	if expired != 1 || closed != 0 {
		t.Fatalf("the log has %d SessionExpired entries for the expired session and %d other session ends; want exactly 1 and 0", expired, closed)
	}
	e.close(live)
	next, err = e.s.ExpireSessions(e.ctx, e.group)
	if err != nil || next != 0 {
		t.Fatalf("ExpireSessions with no live session returned next %v, %v; want 0", next, err)
	}
}

// testClaimBatch: ClaimBatch gives each partition what store.Claim (a
// batch of one) would, logs
// one Claimed entry per claimed partition in order, and rejects the whole
// call for a dead session, a duplicate or too many partitions.
func testClaimBatch(e *env) {
	t := e.t
	a := e.open("a", longTTL)
	b := e.open("b", longTTL)
	held := e.claim("held", b)
	mine := e.claim("mine", a)
	e.checkpoint("mine", mine.Epoch, "pos")
	v := e.snap().Version
	rs, err := e.s.ClaimBatch(e.ctx, e.group, a, []string{"new", "held", "mine"})
	if err != nil || len(rs) != 3 {
		t.Fatalf("ClaimBatch: %d results, %v; want 3 results", len(rs), err)
	}
	if rs[0].Err != nil || rs[0].Ownership.Partition != "new" || rs[0].Ownership.Session != a || rs[0].Ownership.Member != "a" || rs[0].Ownership.Epoch == 0 {
		t.Fatalf("ClaimBatch result for a free partition: %s, %v; want it claimed by %q", fmtOwner(rs[0].Ownership), rs[0].Err, a)
	}
	wantErr(t, rs[1].Err, store.ErrClaimed, "ClaimBatch result for a partition a live session holds", "as Claim")
	if rs[2].Err != nil || rs[2].Ownership.Epoch <= mine.Epoch || string(rs[2].Ownership.Checkpoint) != "pos" {
		t.Fatalf("ClaimBatch result for a partition the session holds: %s, %v; want a new epoch above %d and checkpoint \"pos\"", fmtOwner(rs[2].Ownership), rs[2].Err, mine.Epoch)
	}
	if o := e.mustRecord("held"); !sameOwner(o, held) {
		t.Fatalf("ClaimBatch changed the record of a partition another session holds: %s; want %s", fmtOwner(o), fmtOwner(held))
	}
	cs := e.readLog(v, e.snap().Version)
	if len(cs) != 2 || cs[0].Kind != store.Claimed || cs[0].Partition != "new" || cs[0].Epoch != rs[0].Ownership.Epoch ||
		cs[1].Kind != store.Claimed || cs[1].Partition != "mine" || cs[1].Epoch != rs[2].Ownership.Epoch || cs[1].Member != "a" || cs[1].Session != a {
		t.Fatalf("entries after ClaimBatch: %+v; want Claimed new and Claimed mine, with their epochs", cs)
	}
	_, err = e.s.ClaimBatch(e.ctx, e.group, a, []string{"x", "x"})
	wantErr(t, err, store.ErrInvalid, "ClaimBatch with a duplicate", "a partition is listed once")
	_, err = e.s.ClaimBatch(e.ctx, e.group, a, make([]string, store.MaxBatch+1))
	wantErr(t, err, store.ErrInvalid, "ClaimBatch of MaxBatch+1 partitions", "a batch is bounded")
	rs, err = e.s.ClaimBatch(e.ctx, e.group, a, nil)
	if err != nil || len(rs) != 0 {
		t.Fatalf("ClaimBatch of nothing: %v, %v; want no results and no error", rs, err)
	}
	e.close(a)
	_, err = e.s.ClaimBatch(e.ctx, e.group, a, []string{"new"})
	wantErr(t, err, store.ErrSessionExpired, "ClaimBatch by a closed session", "as Claim")

	// A batch of MaxBatch partitions is one call.
	c := e.open("c", longTTL)
	many := make([]string, store.MaxBatch)
	for i := range many {
		many[i] = fmt.Sprintf("q%04d", i)
	}
	rs, err = e.s.ClaimBatch(e.ctx, e.group, c, many)
	if err != nil || len(rs) != len(many) {
		t.Fatalf("ClaimBatch of %d partitions: %d results, %v", len(many), len(rs), err)
	}
	for i, r := range rs {
		if r.Err != nil || r.Ownership.Partition != many[i] {
			t.Fatalf("ClaimBatch of %d partitions: result %d is %s, %v", len(many), i, fmtOwner(r.Ownership), r.Err)
		}
	}
}

// testReleaseBatch: ReleaseBatch gives each record what store.Release would and
// logs one Released entry per release.
func testReleaseBatch(e *env) {
	t := e.t
	a := e.open("a", longTTL)
	b := e.open("b", longTTL)
	p := e.claim("p", a)
	e.checkpoint("p", p.Epoch, "kept")
	q := e.claim("q", a)
	stale := e.claim("stale", a)
	stale2 := e.claim("stale", a)
	other := e.claim("other", b)
	v := e.snap().Version
	errs, err := e.s.ReleaseBatch(e.ctx, e.group, a, []store.Ownership{
		{Partition: "p", Epoch: p.Epoch}, {Partition: "stale", Epoch: stale.Epoch},
		{Partition: "other", Epoch: other.Epoch}, {Partition: "none", Epoch: 7}, {Partition: "q", Epoch: q.Epoch},
	})
	if err != nil || len(errs) != 5 {
		t.Fatalf("ReleaseBatch: %v, %v; want 5 results", errs, err)
	}
	if errs[0] != nil || errs[4] != nil {
		t.Fatalf("ReleaseBatch of records the session holds: %v, %v; want nil", errs[0], errs[4])
	}
	for i := 1; i <= 3; i++ {
		wantErr(t, errs[i], store.ErrNotOwner, fmt.Sprintf("ReleaseBatch result %d", i), "stale epoch, another session's record, no record")
	}
	if o := e.mustRecord("p"); o.Session != "" || o.Epoch != p.Epoch {
		t.Fatalf("record after ReleaseBatch: %s; want released at epoch %d", fmtOwner(o), p.Epoch)
	}
	if o := e.mustRecord("stale"); !sameOwner(o, stale2) {
		t.Fatalf("ReleaseBatch with a stale epoch changed the record: %s", fmtOwner(o))
	}
	cs := e.readLog(v, e.snap().Version)
	if len(cs) != 2 || cs[0].Kind != store.Released || cs[0].Partition != "p" || cs[0].Epoch != p.Epoch || cs[0].Session != a ||
		cs[1].Kind != store.Released || cs[1].Partition != "q" {
		t.Fatalf("entries after ReleaseBatch: %+v; want Released p and Released q", cs)
	}
	e.wantCheckpoint("p", b, "kept", "ReleaseBatch keeps the checkpoint")
	_, err = e.s.ReleaseBatch(e.ctx, e.group, a, []store.Ownership{{Partition: "q", Epoch: 0}})
	wantErr(t, err, store.ErrInvalid, "ReleaseBatch with epoch 0", "as Release")
	_, err = e.s.ReleaseBatch(e.ctx, e.group, a, []store.Ownership{{Partition: "q", Epoch: 1}, {Partition: "q", Epoch: 2}})
	wantErr(t, err, store.ErrInvalid, "ReleaseBatch with a duplicate", "a partition is listed once")
	e.close(a)
	errs, err = e.s.ReleaseBatch(e.ctx, e.group, a, []store.Ownership{{Partition: "stale", Epoch: stale2.Epoch}})
	if err != nil || len(errs) != 1 || !errors.Is(errs[0], store.ErrNotOwner) {
		t.Fatalf("ReleaseBatch by a closed session: %v, %v; want ErrNotOwner for the record, as Release", errs, err)
	}
}

// RunTrim checks ErrVersionGone for a version whose entries were trimmed.
// s must keep at most about limit entries of a group's log (a backend's
// option; it may keep more, as Redis's approximate trimming does, by up to
// 100 entries): after 4*limit+300 changes, the first version is gone, and
// the snapshot's version can still be continued.
func RunTrim(t *testing.T, s store.Store, limit int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), subtestTimeout)
	defer cancel()
	e := &env{t: t, s: s, ctx: ctx, group: newGroup(t, "")}
	sess := e.open("m", longTTL)
	v := e.snap().Version
	for i := range 2*limit + 150 {
		o := e.claim(fmt.Sprintf("p%d", i%3), sess)
		e.release(o.Partition, sess, o.Epoch)
	}
	_, _, err := e.s.Changes(ctx, e.group, v, 10)
	wantErr(t, err, store.ErrVersionGone, fmt.Sprintf("Changes(after %v) after %d changes with a log of %d entries", v, 4*limit+300, limit), "the entries were trimmed")
	snap := e.snap()
	e.open("m2", longTTL)
	cs := e.readLog(snap.Version, e.snap().Version)
	if len(cs) != 1 || cs[0].Kind != store.SessionOpened {
		t.Fatalf("entries after the trimmed log's last snapshot: %+v; want one SessionOpened", cs)
	}
}
