package redisstore

// Expiry, Close, contexts, lost keys, a restarted server, trimming; and benchmarks of single calls.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

// TestExpiryLogged: a session that is not renewed expires by the server's
// clock, and the next KeepAlive of another member logs it.
func TestExpiryLogged(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := ctxT(t)
	const g = "expiry"
	live, _ := s.OpenSession(ctx, g, "live", 1, time.Minute)
	short, _ := s.OpenSession(ctx, g, "short", 2, 300*time.Millisecond)
	o, err := store.Claim(ctx, s, g, "p", short)
	must(t, err, "Claim")
	snap, _ := s.Snapshot(ctx, g)
	for _, si := range snap.Sessions {
		if si.ID == short && (si.Remaining <= 0 || si.Remaining > 300*time.Millisecond || si.Weight != 2 || si.Member != "short") {
			t.Fatalf("session info %+v", si)
		}
	}
	time.Sleep(400 * time.Millisecond)
	must(t, keepErr(s.KeepAlive(ctx, g, live, time.Minute)), "KeepAlive of the live session")
	if cs, _, err := s.Changes(ctx, g, snap.Version, 10); err != nil || len(cs) != 1 || cs[0].Kind != store.SessionExpired || cs[0].Session != short {
		t.Fatalf("the log after the KeepAlive: %+v, %v; want the expiry of %s", cs, err, short)
	}
	wantIs(t, keepErr(s.KeepAlive(ctx, g, short, time.Minute)), store.ErrSessionExpired, "KeepAlive of the expired session")
	wantIs(t, s.Checkpoint(ctx, g, "p", o.Epoch, []byte("late")), store.ErrNotOwner, "Checkpoint of an expired owner")
	o2, err := store.Claim(ctx, s, g, "p", live)
	must(t, err, "Claim of the expired owner's partition")
	if o2.Epoch <= o.Epoch {
		t.Fatalf("epoch %d after takeover; want > %d", o2.Epoch, o.Epoch)
	}
	_, err = store.Claim(ctx, s, g, "q", short)
	wantIs(t, err, store.ErrSessionExpired, "Claim by an expired session")
}

// TestClose: Close returns and later calls fail.
func TestClose(t *testing.T) {
	raw := redistest.Need(t)
	s := openWithPrefix(t, testPrefix(t, raw))
	ctx := ctxT(t)
	done := make(chan struct{})
	go func() { _ = s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	_, err := s.Snapshot(ctx, "a")
	wantIs(t, err, store.ErrUnavailable, "Snapshot after Close")
	_, _, err = s.Changes(ctx, "a", store.Version{}, 1)
	wantIs(t, err, store.ErrUnavailable, "Changes after Close")
	must(t, s.Close(), "second Close")
}

// TestContextErrors: a cancelled context gives an error that is both
// ErrUnavailable and the context's error.
func TestContextErrors(t *testing.T) {
	s, _ := newTestStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Snapshot(ctx, "g")
	wantIs(t, err, store.ErrUnavailable, "Snapshot with cancelled ctx")
	wantIs(t, err, context.Canceled, "Snapshot with cancelled ctx")
	_, _, err = s.Changes(ctx, "g", store.Version{}, 1)
	wantIs(t, err, context.Canceled, "Changes with cancelled ctx")

	// A deadline that passes while the server is busy.
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	time.Sleep(2 * time.Millisecond)
	err = keepErr(s.KeepAlive(ctx2, "g", "s", time.Second))
	wantIs(t, err, store.ErrUnavailable, "KeepAlive past deadline")
	wantIs(t, err, context.DeadlineExceeded, "KeepAlive past deadline")
}

// TestOpenSessionRetried: the open script is idempotent for its own id, so
// a client retry after a lost reply does not fail or open two sessions.
func TestOpenSessionRetried(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := ctxT(t)
	k := s.keys("g")
	for i, meta := range []string{"1:m", "1:m", "2:other"} {
		status, _, err := s.runLogged(ctx, "open", openScript, k, []string{k.sessions, k.members}, "FIXEDIDFIXEDIDFIXEDIDFIXED", "60000000", meta)
		must(t, err, "open script")
		want := "ok"
		if i == 2 {
			want = "dup"
		}
		if status != want {
			t.Fatalf("call %d: status %q; want %q", i, status, want)
		}
	}
	snap, _ := s.Snapshot(ctx, "g")
	if len(snap.Sessions) != 1 || snap.Sessions[0].Member != "m" {
		t.Fatalf("sessions %+v; want one of member m", snap.Sessions)
	}
}

// TestGroupKeysLost: deleting a group's keys (what FLUSHALL or a restart
// without persistence does) loses sessions and records, but epochs handed
// out afterwards are still greater than every earlier one.
func TestGroupKeysLost(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "lost"
	id, _ := s.OpenSession(ctx, g, "m", 1, time.Minute)
	var maxEpoch uint64
	for i := range 50 {
		p := fmt.Sprint("p", i%3)
		o, err := store.Claim(ctx, s, g, p, id)
		must(t, err, "Claim")
		maxEpoch = o.Epoch
		must(t, store.Release(ctx, s, g, p, id, o.Epoch), "Release")
	}
	k := s.keys(g)
	must(t, raw.Del(ctx, k.sessions, k.members, k.partitions, k.owners, k.checkpoints, k.epochat, k.ckptat, k.partset).Err(), "DEL")
	wantIs(t, keepErr(s.KeepAlive(ctx, g, id, time.Minute)), store.ErrSessionExpired, "KeepAlive after loss")
	id2, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession")
	if id2 == id {
		t.Fatal("session id reused after data loss")
	}
	for i := range 3 {
		o, err := store.Claim(ctx, s, g, fmt.Sprint("p", i), id2)
		must(t, err, "Claim after loss")
		if o.Epoch <= maxEpoch {
			t.Fatalf("epoch after loss %d; want > %d", o.Epoch, maxEpoch)
		}
	}
}

// TestServerRestart runs a private redis-server, restarts it empty in the
// middle, and checks what a member sees: its session is gone, the feed
// resyncs, and epochs keep increasing.
func TestServerRestart(t *testing.T) {
	redistest.Need(t) // honours HERD_REQUIRE_SERVERS
	ts := redistest.StartServer(t)
	ctx := ctxT(t)
	s, err := Open(ctx, ts.URL()+"?dial_timeout=1s")
	must(t, err, "Open")
	defer s.Close()
	const g = "restart"
	id, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession")
	var maxEpoch uint64
	for i := range 100 {
		p := fmt.Sprint("p", i%4)
		o, err := store.Claim(ctx, s, g, p, id)
		must(t, err, "Claim")
		maxEpoch = o.Epoch
		must(t, store.Release(ctx, s, g, p, id, o.Epoch), "Release")
	}
	o, err := store.Claim(ctx, s, g, "kept", id)
	must(t, err, "Claim")
	maxEpoch = o.Epoch
	before, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")

	ts.Restart()

	// The pool's connections died with the server; calls recover.
	var kerr error
	for range 50 {
		kerr = keepErr(s.KeepAlive(ctx, g, id, time.Minute))
		if !errors.Is(kerr, store.ErrUnavailable) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantIs(t, kerr, store.ErrSessionExpired, "KeepAlive after the restart")
	wantIs(t, s.Checkpoint(ctx, g, "kept", o.Epoch, []byte("x")), store.ErrNotOwner, "Checkpoint after the restart")
	id2, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession after the restart")
	if id2 == id {
		t.Fatal("session id repeated after the restart")
	}
	// The log is a new history: a reader of the old one reads anew.
	_, _, err = s.Changes(ctx, g, before.Version, 10)
	wantIs(t, err, store.ErrVersionGone, "Changes after the restart, from a version before it")
	for _, p := range []string{"kept", "p0", "new"} {
		o, err := store.Claim(ctx, s, g, p, id2)
		must(t, err, "Claim after the restart")
		if o.Epoch <= maxEpoch {
			t.Fatalf("epoch of %s after the restart %d; want > %d (every epoch before)", p, o.Epoch, maxEpoch)
		}
	}

	// Server down: calls fail with ErrUnavailable, promptly.
	ts.Kill()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = s.Snapshot(sctx, g)
	wantIs(t, err, store.ErrUnavailable, "Snapshot with the server down")
	// And the store works again once it is back.
	ts.Start()
	var serr error
	for range 50 {
		if _, serr = s.Snapshot(ctx, g); serr == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	must(t, serr, "Snapshot once the server is back")
}

// Benchmarks of the steady-state operations (one round trip each).

func benchStore(b *testing.B) (*Store, context.Context, string) {
	s, _ := newTestStore(b)
	ctx := context.Background()
	const g = "bench"
	id, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	return s, ctx, id
}

func BenchmarkKeepAlive(b *testing.B) {
	s, ctx, id := benchStore(b)
	for b.Loop() {
		if err := keepErr(s.KeepAlive(ctx, "bench", id, time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckpoint(b *testing.B) {
	s, ctx, id := benchStore(b)
	o, err := store.Claim(ctx, s, "bench", "p", id)
	if err != nil {
		b.Fatal(err)
	}
	v := bytes.Repeat([]byte("x"), 64)
	for b.Loop() {
		if err := s.Checkpoint(ctx, "bench", "p", o.Epoch, v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClaimRelease(b *testing.B) {
	s, ctx, id := benchStore(b)
	for b.Loop() {
		o, err := store.Claim(ctx, s, "bench", "p", id)
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Release(ctx, s, "bench", "p", id, o.Epoch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshot100 reads a group of 10 sessions and 100 owned partitions.
func BenchmarkSnapshot100(b *testing.B) {
	s, ctx, _ := benchStore(b)
	ps := make([]store.Partition, 100)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprint("p", i)}
	}
	if _, err := s.SetPartitions(ctx, "bench", store.PartitionSet{Partitions: ps}); err != nil {
		b.Fatal(err)
	}
	for i := range 10 {
		id, _ := s.OpenSession(ctx, "bench", fmt.Sprint("m", i), 1, time.Minute)
		for j := i; j < 100; j += 10 {
			o, err := store.Claim(ctx, s, "bench", ps[j].ID, id)
			if err != nil {
				b.Fatal(err)
			}
			_ = s.Checkpoint(ctx, "bench", ps[j].ID, o.Epoch, []byte("offset-123456"))
		}
	}
	for b.Loop() {
		if _, err := s.Snapshot(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLogTrimmed(t *testing.T) {
	raw := redistest.Need(t)
	s := openWithPrefix(t, testPrefix(t, raw), WithLogLimit(10))
	storetest.RunTrim(t, s, 10)
}
