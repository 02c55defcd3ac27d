package memstore_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestLogTrimmed(t *testing.T) {
	s := memstore.New(memstore.WithLogLimit(10))
	defer s.Close()
	storetest.RunTrim(t, s, 10)
}

// fakeClock is a manual clock for WithClock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func mustOpen(t *testing.T, s store.Store, group, member string, ttl time.Duration) string {
	t.Helper()
	id, err := s.OpenSession(t.Context(), group, member, 1, ttl)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	return id
}

func mustSnap(t *testing.T, s store.Store, group string) *store.Snapshot {
	t.Helper()
	snap, err := s.Snapshot(t.Context(), group)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return snap
}

// TestVirtualTime runs the store inside a synctest bubble: sessions expire
// after exactly their TTL of virtual time, the expiry is logged when
// noticed, and epochs follow the virtual clock.
func TestVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := memstore.New()
		const ttl = 10 * time.Second
		a := mustOpen(t, s, "g", "a", ttl)
		b := mustOpen(t, s, "g", "b", time.Hour)
		o, err := store.Claim(ctx, s, "g", "p", a)
		if err != nil {
			t.Fatal(err)
		}
		if want := store.NextEpoch(0, time.Now()); o.Epoch != want {
			t.Fatalf("epoch %d; want NextEpoch(0, virtual now) = %d", o.Epoch, want)
		}
		claimed := mustSnap(t, s, "g").Version

		time.Sleep(ttl - time.Nanosecond)
		snap := mustSnap(t, s, "g")
		if !snap.Alive(a) {
			t.Fatalf("session dead 1ns before its TTL of virtual time")
		}
		if r := snap.Sessions[0].Remaining; r != time.Nanosecond {
			t.Fatalf("Remaining = %v; want 1ns", r)
		}
		time.Sleep(time.Nanosecond)
		// Nothing runs in the background: the expiry is noticed by the
		// next call, whatever it is, and logged then.
		if err := keepErr(s.KeepAlive(ctx, "g", a, ttl)); !errors.Is(err, store.ErrSessionExpired) {
			t.Fatalf("KeepAlive at exactly the TTL: %v; want ErrSessionExpired", err)
		}
		if cs, _, err := s.Changes(ctx, "g", claimed, 10); err != nil || len(cs) != 1 || cs[0].Kind != store.SessionExpired || cs[0].Session != a {
			t.Fatalf("log after the expiry: %+v, %v; want a's expiry", cs, err)
		}
		if err := s.Checkpoint(ctx, "g", "p", o.Epoch, []byte("x")); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("Checkpoint after expiry: %v; want ErrNotOwner", err)
		}
		ob, err := store.Claim(ctx, s, "g", "p", b)
		if err != nil {
			t.Fatal(err)
		}
		if want := store.NextEpoch(o.Epoch, time.Now()); ob.Epoch != want || ob.Epoch <= o.Epoch {
			t.Fatalf("takeover epoch %d; want %d (> %d)", ob.Epoch, want, o.Epoch)
		}

		// KeepAlive in virtual time keeps b alive for a long time.
		for range 100 {
			time.Sleep(30 * time.Minute)
			if err := keepErr(s.KeepAlive(ctx, "g", b, time.Hour)); err != nil {
				t.Fatalf("KeepAlive: %v", err)
			}
		}
	})
}

// TestClock: the store's clock decides expiry and epochs; epochs still
// increase when the clock goes backwards.
func TestClock(t *testing.T) {
	ctx := t.Context()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := memstore.New(memstore.WithClock(clock.Now))
	a := mustOpen(t, s, "g", "a", time.Minute)
	o1, err := store.Claim(ctx, s, "g", "p", a)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(clock.Now().UnixMicro()); o1.Epoch != want {
		t.Fatalf("epoch %d; want the clock in microseconds %d", o1.Epoch, want)
	}
	if err := store.Release(ctx, s, "g", "p", a, o1.Epoch); err != nil {
		t.Fatal(err)
	}
	clock.Add(-time.Hour)
	o2, err := store.Claim(ctx, s, "g", "p", a)
	if err != nil {
		t.Fatal(err)
	}
	if o2.Epoch != o1.Epoch+1 {
		t.Fatalf("epoch after the clock went back: %d; want previous+1 = %d", o2.Epoch, o1.Epoch+1)
	}
	clock.Add(time.Hour + time.Minute - time.Microsecond) // 1µs before expiry
	if !mustSnap(t, s, "g").Alive(a) {
		t.Fatal("session expired before its TTL on the store's clock")
	}
	clock.Add(time.Microsecond)
	if mustSnap(t, s, "g").Alive(a) {
		t.Fatal("session alive after its TTL on the store's clock")
	}
}

// TestCopies: callers cannot change the store through values they passed
// in or got back.
func TestCopies(t *testing.T) {
	ctx := t.Context()
	s := memstore.New()
	a := mustOpen(t, s, "g", "a", time.Minute)
	o, err := store.Claim(ctx, s, "g", "p", a)
	if err != nil {
		t.Fatal(err)
	}
	value := []byte("original")
	if err := s.Checkpoint(ctx, "g", "p", o.Epoch, value); err != nil {
		t.Fatal(err)
	}
	copy(value, "XXXXXXXX")
	again, err := store.Claim(ctx, s, "g", "p", a)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Checkpoint) != "original" {
		t.Fatalf("checkpoint %q after the caller changed its buffer; want %q", again.Checkpoint, "original")
	}
	copy(again.Checkpoint, "YYYYYYYY")
	third, err := store.Claim(ctx, s, "g", "p", a)
	if err != nil {
		t.Fatal(err)
	}
	if got := third.Checkpoint; string(got) != "original" {
		t.Fatalf("checkpoint %q after the caller changed what Claim returned; want %q", got, "original")
	}
	parts := []store.Partition{{ID: "b"}, {ID: "a"}}
	if _, err := s.SetPartitions(ctx, "g", store.PartitionSet{Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	parts[0].ID = "zzz"
	if got := mustSnap(t, s, "g").Partitions; got[0].ID != "a" || got[1].ID != "b" {
		t.Fatalf("partitions %+v after the caller changed its slice; want [a b]", got)
	}
}
