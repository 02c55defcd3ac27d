package sqlitestore_test

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
)

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

func newClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// The host's wall clock stepping back lengthens every TTL by the step
// (Remaining never shows more than the TTL), and stepping forward expires
// sessions early; epochs increase across both.
func TestClockSteps(t *testing.T) {
	ctx := t.Context()
	clock := newClock()
	s := open(t, filepath.Join(t.TempDir(), "herd.db"), sqlitestore.WithClock(clock.Now))
	const ttl = time.Minute
	a, err := s.OpenSession(ctx, "g", "a", 1, ttl)
	if err != nil {
		t.Fatal(err)
	}
	o1, err := store.Claim(ctx, s, "g", "p", a)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(clock.Now().UnixMicro()); o1.Epoch != want {
		t.Fatalf("epoch %d; want the clock in µs, %d", o1.Epoch, want)
	}
	if err := store.Release(ctx, s, "g", "p", a, o1.Epoch); err != nil {
		t.Fatal(err)
	}

	clock.Add(-time.Hour) // the wall clock steps back an hour
	snap, err := s.Snapshot(ctx, "g")
	if err != nil || len(snap.Sessions) != 1 {
		t.Fatalf("Snapshot after the clock stepped back: %+v, %v", snap, err)
	}
	if r := snap.Sessions[0].Remaining; r != ttl {
		t.Errorf("Remaining after the clock stepped back an hour: %v; want it capped at the TTL, %v", r, ttl)
	}
	o2, err := store.Claim(ctx, s, "g", "p", a)
	if err != nil {
		t.Fatal(err)
	}
	if o2.Epoch != o1.Epoch+1 {
		t.Errorf("epoch after the clock stepped back: %d; want previous+1 = %d", o2.Epoch, o1.Epoch+1)
	}
	next, err := s.KeepAlive(ctx, "g", a, ttl)
	if err != nil || next != ttl {
		t.Errorf("KeepAlive after the step: next %v, %v; want %v", next, err, ttl)
	}

	// The wall clock steps forward past the renewed deadline: the session
	// expires early, by the store's clock.
	clock.Add(time.Hour)
	if _, err := s.KeepAlive(ctx, "g", a, ttl); !errors.Is(err, store.ErrSessionExpired) {
		t.Fatalf("KeepAlive after the clock stepped forward past the deadline: %v; want ErrSessionExpired", err)
	}
	b, err := s.OpenSession(ctx, "g", "b", 1, ttl)
	if err != nil {
		t.Fatal(err)
	}
	o3, err := store.Claim(ctx, s, "g", "p", b)
	if err != nil {
		t.Fatal(err)
	}
	if o3.Epoch <= o2.Epoch {
		t.Errorf("epoch of the takeover %d; want above %d", o3.Epoch, o2.Epoch)
	}
	if err := s.Checkpoint(ctx, "g", "p", o2.Epoch, []byte("late")); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("Checkpoint at the expired owner's epoch: %v; want ErrNotOwner", err)
	}
}

// A group deleted and written again never repeats an epoch, even when the
// clock is then a day behind: the file keeps the highest deleted epoch.
func TestEpochsAfterDeleteGroup(t *testing.T) {
	ctx := t.Context()
	clock := newClock()
	s := open(t, filepath.Join(t.TempDir(), "herd.db"), sqlitestore.WithClock(clock.Now))
	a, _ := s.OpenSession(ctx, "g", "a", 1, time.Minute)
	var last uint64
	for range 3 {
		o, err := store.Claim(ctx, s, "g", "p", a)
		if err != nil {
			t.Fatal(err)
		}
		last = o.Epoch
	}
	if err := s.DeleteGroup(ctx, "g", true); err != nil {
		t.Fatal(err)
	}
	clock.Add(-24 * time.Hour)
	b, err := s.OpenSession(ctx, "g", "b", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	o, err := store.Claim(ctx, s, "g", "p", b)
	if err != nil {
		t.Fatal(err)
	}
	if o.Epoch <= last {
		t.Fatalf("epoch after DeleteGroup and a clock a day behind: %d; want above the deleted %d", o.Epoch, last)
	}
	// Epochs of 2^63 and more (stored as negative integers) count too.
	if err := s.Restore(ctx, "h", "q", 1<<63+5, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteGroup(ctx, "h", false); err != nil {
		t.Fatal(err)
	}
	c, _ := s.OpenSession(ctx, "h", "c", 1, time.Minute)
	o, err = store.Claim(ctx, s, "h", "q", c)
	if err != nil || o.Epoch != 1<<63+6 {
		t.Fatalf("claim after deleting a group with epoch 2^63+5: %d, %v; want 2^63+6", o.Epoch, err)
	}
}
