package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/pgtest"
	"github.com/herdhq/herd/store"
)

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type changesReply struct {
	cs   []store.Change
	next store.Version
	err  error
}

// changesAsync calls Changes after v on a goroutine.
func changesAsync(ctx context.Context, s *Store, group string, v store.Version) <-chan changesReply {
	ch := make(chan changesReply, 1)
	go func() {
		cs, next, err := s.Changes(ctx, group, v, 100)
		ch <- changesReply{cs, next, err}
	}()
	return ch
}

// wantEntry waits for a Changes reply holding one entry of kind.
func wantEntry(t *testing.T, ch <-chan changesReply, kind store.ChangeKind, within time.Duration, why string) store.Version {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil || len(r.cs) == 0 || r.cs[0].Kind != kind {
			t.Fatalf("%s: Changes returned %+v, %v; want a %v entry", why, r.cs, r.err, kind)
		}
		return r.next
	case <-time.After(within):
		t.Fatalf("%s: Changes did not return within %v", why, within)
	}
	return store.Version{}
}

// With the poll and backstop intervals at an hour, only notifications wake
// a waiting Changes: a write wakes it at once; after the LISTEN
// connection's backend is terminated, the store connects again, and a
// write made meanwhile still reaches the reader (every waiting call reads
// again when the connection is back), as do writes after it.
func TestListenDropThenContinue(t *testing.T) {
	s := openTest(t, WithPollInterval(time.Hour), withBackstop(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "listen-drop"
	sess, v := claimWithListenUp(ctx, t, s, group)

	pid := s.hub.listenerPID()
	second := changesAsync(ctx, s, group, v)
	admin(t, "SELECT pg_terminate_backend($1)", int32(pid))
	if _, err := store.Claim(ctx, s, group, "p2", sess); err != nil {
		t.Fatal(err)
	}
	v = wantEntry(t, second, store.Claimed, 15*time.Second, "a claim made while the LISTEN connection was being replaced")
	waitFor(t, 15*time.Second, "a new LISTEN connection", func() bool {
		p := s.hub.listenerPID()
		return p != 0 && p != pid
	})
	third := changesAsync(ctx, s, group, v)
	if _, err := store.Claim(ctx, s, group, "p3", sess); err != nil {
		t.Fatal(err)
	}
	wantEntry(t, third, store.Claimed, 5*time.Second, "a claim after the LISTEN connection came back")
}

// A renewal neither logs nor notifies: a reader waiting with only LISTEN
// to wake it stays asleep through renewals and checkpoints.
func TestListenNotRenewals(t *testing.T) {
	s := openTest(t, WithPollInterval(time.Hour), withBackstop(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "listen-renewals"
	sess, err := s.OpenSession(ctx, group, "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	o, err := store.Claim(ctx, s, group, "p", sess)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	ch := changesAsync(rctx, s, group, snap.Version)
	waitFor(t, 10*time.Second, "the LISTEN connection is up", func() bool { return s.hub.listenerPID() != 0 })
	for range 20 {
		if _, err := s.KeepAlive(ctx, group, sess, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Checkpoint(ctx, group, "p", o.Epoch, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// A notification of another group wakes nobody here either.
	if _, err := s.OpenSession(ctx, "listen-renewals-other", "m", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	s.hub.mu.Lock()
	_, waiting := s.hub.waits[group]
	s.hub.mu.Unlock()
	if !waiting {
		t.Fatal("the reader's wait was ended by renewals, checkpoints or another group's change")
	}
	select {
	case r := <-ch:
		t.Fatalf("Changes returned %+v, %v after renewals and checkpoints only", r.cs, r.err)
	default:
	}
	if err := store.Release(ctx, s, group, "p", sess, o.Epoch); err != nil {
		t.Fatal(err)
	}
	wantEntry(t, ch, store.Released, 5*time.Second, "a release")
}

// listen=off: no LISTEN connection is ever made; Changes wakes by polling.
func TestListenOff(t *testing.T) {
	requireServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := newSchema(t)
	s, err := Open(ctx, withOptions(testURL(), "schema", schema, "listen", "off", "poll_interval", "20ms"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.cfg.listen || s.cfg.poll != 20*time.Millisecond {
		t.Fatalf("listen=off&poll_interval=20ms gave listen %v, poll %v", s.cfg.listen, s.cfg.poll)
	}
	const group = "listen-off"
	if _, err := s.OpenSession(ctx, group, "m", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ch := changesAsync(ctx, s, group, snap.Version)
	if _, err := s.SetPartitions(ctx, group, store.PartitionSet{Partitions: []store.Partition{{ID: "a"}}}); err != nil {
		t.Fatal(err)
	}
	wantEntry(t, ch, store.PartitionsSet, 5*time.Second, "a change with LISTEN off")
	s.hub.mu.Lock()
	started := s.hub.started
	s.hub.mu.Unlock()
	if started {
		t.Fatal("a LISTEN connection was started with listen=off")
	}
}

// When LISTEN does not deliver (as behind a pooler in transaction mode,
// here a connection listening on another channel) or the connection cannot
// be made at all, the store finds out and Changes polls.
func TestListenUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(s *Store)
	}{
		{"notifications never arrive", func(s *Store) {
			s.hub.listenOn = "herd_nobody_notifies_this"
			s.hub.verify = 200 * time.Millisecond
		}},
		{"connection refused", func(s *Store) { s.hub.connCfg.Port = 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, WithPollInterval(20*time.Millisecond), withBackstop(time.Hour))
			tc.break_(s)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const group = "listen-broken"
			if _, err := s.OpenSession(ctx, group, "m", 1, time.Minute); err != nil {
				t.Fatal(err)
			}
			snap, err := s.Snapshot(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			v := snap.Version
			for i := range 3 {
				ch := changesAsync(ctx, s, group, v)
				// A set of its own each time: the set stored already is not
				// written again, and logs nothing.
				set := []store.Partition{{ID: "a", Weight: i}}
				if _, err := s.SetPartitions(ctx, group, store.PartitionSet{Partitions: set}); err != nil {
					t.Fatal(err)
				}
				v = wantEntry(t, ch, store.PartitionsSet, 5*time.Second, "change "+string(rune('1'+i)))
			}
			if tc.name == "notifications never arrive" {
				waitFor(t, 5*time.Second, "the LISTEN check fails", func() bool {
					s.hub.mu.Lock()
					defer s.hub.mu.Unlock()
					return s.hub.warned
				})
			}
			if s.hub.listenerPID() != 0 {
				t.Fatal("the store believes its broken LISTEN connection works")
			}
			if d := s.hub.interval(); d != 20*time.Millisecond {
				t.Fatalf("waiting calls read every %v; want the poll interval", d)
			}
		})
	}
}

// A LISTEN connection lost while the store checks it (waiting for its own
// notification) is a lost connection, not a LISTEN that does not work: the
// store connects again at once, and neither warns nor falls back to
// polling for a minute.
func TestListenDroppedDuringCheck(t *testing.T) {
	s := openTest(t, WithPollInterval(20*time.Millisecond), withBackstop(time.Hour))
	// A channel nobody notifies, named after the test's own schema: the
	// check waits (30 s) and the connection is found by its LISTEN.
	channel := s.schema + "_check"
	s.hub.listenOn = channel
	s.hub.verify = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "listen-check-dropped"
	if _, err := s.OpenSession(ctx, group, "m", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ch := changesAsync(ctx, s, group, snap.Version) // starts the listener
	listening := func() int64 {
		return pgtest.Count(t, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE query = $1`, `LISTEN "`+channel+`"`)
	}
	var pid int64
	waitFor(t, 10*time.Second, "a LISTEN connection being checked", func() bool { pid = listening(); return pid != 0 })
	admin(t, "SELECT pg_terminate_backend($1)", int32(pid))
	waitFor(t, 5*time.Second, "a new LISTEN connection after the first was terminated during its check", func() bool {
		p := listening()
		return p != 0 && p != pid
	})
	s.hub.mu.Lock()
	warned := s.hub.warned
	s.hub.mu.Unlock()
	if warned {
		t.Error("the store warned that LISTEN does not work after its connection was terminated during the check")
	}
	if _, err := s.SetPartitions(ctx, group, store.PartitionSet{Partitions: []store.Partition{{ID: "a"}}}); err != nil {
		t.Fatal(err)
	}
	wantEntry(t, ch, store.PartitionsSet, 5*time.Second, "a change while the LISTEN connection is being checked")
}

// Changes returns promptly when its context ends while it waits.
func TestChangesCancelWhileWaiting(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := s.OpenSession(ctx, "cancel", "m", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, "cancel")
	if err != nil {
		t.Fatal(err)
	}
	ch := changesAsync(ctx, s, "cancel", snap.Version)
	cancel()
	select {
	case r := <-ch:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Changes after cancel: %v; want context.Canceled", r.err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Changes did not return within 2s of its context's end")
	}
}

// A reader waiting through a run of single changes takes their entries
// from the notifications, without reading the log table each time; a
// change whose notification does not carry its entries (a partition set)
// is read from the table.
func TestNotificationsCarryEntries(t *testing.T) {
	s := openTest(t, WithPollInterval(time.Hour), withBackstop(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "notes"
	sess, err := s.OpenSession(ctx, group, "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	v := mustSnap(t, s, group).Version
	ch := changesAsync(ctx, s, group, v)
	waitFor(t, 10*time.Second, "the LISTEN connection is up", func() bool { return s.hub.listenerPID() != 0 })
	if _, err := store.Claim(ctx, s, group, "p0", sess); err != nil {
		t.Fatal(err)
	}
	v = wantEntry(t, ch, store.Claimed, 5*time.Second, "the first claim")
	before := s.logReads.Load()
	var got []store.Change
	for i := 1; i <= 50; i++ {
		ch := changesAsync(ctx, s, group, v)
		o, err := store.Claim(ctx, s, group, "p"+string(rune('0'+i%10)), sess)
		if err != nil {
			t.Fatal(err)
		}
		r := <-ch
		if r.err != nil || len(r.cs) != 1 || r.cs[0].Epoch != o.Epoch || r.cs[0].Partition != o.Partition || r.cs[0].Session != sess || r.cs[0].Member != "m" {
			t.Fatalf("claim %d: Changes returned %+v, %v; want the claim of %s at epoch %d", i, r.cs, r.err, o.Partition, o.Epoch)
		}
		got = append(got, r.cs...)
		v = r.next
	}
	if reads := s.logReads.Load() - before; reads > 5 {
		t.Fatalf("a reader read the log table %d times through 50 single claims; want the entries from the notifications", reads)
	}
	// The same entries as the table holds.
	snap := mustSnap(t, s, group)
	if snap.Version != v {
		t.Fatalf("the reader is at %v, the group at %v", v, snap.Version)
	}
	ch = changesAsync(ctx, s, group, v)
	if _, err := s.SetPartitions(ctx, group, store.PartitionSet{Partitions: []store.Partition{{ID: "a"}}}); err != nil {
		t.Fatal(err)
	}
	wantEntry(t, ch, store.PartitionsSet, 5*time.Second, "a partition set (read from the table)")
	for i, c := range got {
		cs, _, err := s.readChanges(ctx, group, versionBefore(t, s, group, c.Version), 1)
		if err != nil || len(cs) != 1 || !sameChange(cs[0], c) {
			t.Fatalf("entry %d from a notification %+v; the table has %+v, %v", i, c, cs, err)
		}
	}
}

// versionBefore is the version of the entry before v, read from the table.
func versionBefore(t *testing.T, s *Store, group string, v store.Version) store.Version {
	t.Helper()
	var tag int64
	if err := s.Pool().QueryRow(context.Background(), "SELECT l.tag FROM "+s.qschema+".log l JOIN "+s.qschema+
		".groups g ON g.gid = l.gid WHERE g.name = $1 AND l.seq = $2", group, int64(v.Seq-1)).Scan(&tag); err != nil {
		t.Fatal(err)
	}
	return store.Version{Seq: v.Seq - 1, Tag: uint64(tag)}
}

func sameChange(a, b store.Change) bool {
	return a.Version == b.Version && a.Kind == b.Kind && a.Session == b.Session && a.Member == b.Member &&
		a.Weight == b.Weight && a.Partition == b.Partition && a.Epoch == b.Epoch && a.GivenBack == b.GivenBack
}

// claimWithListenUp opens a session in group, waits for the store's LISTEN
// connection, claims p1 and waits for a reader to get the entry; it
// returns the session and the entry's version.
func claimWithListenUp(ctx context.Context, t *testing.T, s *Store, group string) (string, store.Version) {
	t.Helper()
	sess, err := s.OpenSession(ctx, group, "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	first := changesAsync(ctx, s, group, snap.Version)
	waitFor(t, 10*time.Second, "the LISTEN connection is up", func() bool { return s.hub.listenerPID() != 0 })
	if _, err := store.Claim(ctx, s, group, "p1", sess); err != nil {
		t.Fatal(err)
	}
	return sess, wantEntry(t, first, store.Claimed, 5*time.Second, "a claim with LISTEN up")
}
