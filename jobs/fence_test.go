package jobs_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/herdtest"
	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// stallingStore stops its member, as SIGSTOP would, for stall right after
// the store applied its next "running" write, once armed: the member's gate
// is paused (its renewals stop) and the write's call returns only when the
// stall ends.
type stallingStore struct {
	*memstore.Store
	gate  *herdtest.Gate
	stall time.Duration

	mu    sync.Mutex
	armed bool
	key   string    // the key whose write stalled
	at    time.Time // when the stall began
}

func (s *stallingStore) arm() {
	s.mu.Lock()
	s.armed = true
	s.mu.Unlock()
}

func (s *stallingStore) stalled() (string, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key, s.at
}

func (s *stallingStore) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	err := s.Store.Checkpoint(ctx, group, partition, epoch, value)
	if err != nil {
		return err
	}
	r, _ := jobs.DecodeRecord(value)
	s.mu.Lock()
	stall := s.armed && r.Running
	if stall {
		s.armed, s.key, s.at = false, partition, time.Now()
	}
	s.mu.Unlock()
	if stall {
		s.gate.Pause()
		time.Sleep(s.stall) // the process is stopped: virtual time passes
		s.gate.Resume()
	}
	return nil
}

// A member stopped (40 s, TTL 10 s) between its accepted "running" write
// and the call of Run: the successor takes the key over and runs the slot;
// the stalled member, when it resumes, does not run it too.
func TestStalledAfterRunningWriteDoesNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f := newFleet(t, ctx, jobs.Config{Every: time.Minute, NoSpread: true, SessionTTL: 10 * time.Second})
		f.runFor = func(string, jobs.Run) time.Duration { return 30 * time.Second }
		var m1 *stallingStore
		f.wrap = func(id string, g *herdtest.Gate, st store.Store) store.Store {
			ss := &stallingStore{Store: f.st, gate: g, stall: 40 * time.Second}
			if id == "m1" {
				m1 = ss
			}
			return ss
		}
		f.start(1, keys("k", 4))
		f.start(1, nil)
		time.Sleep(2*time.Minute + 5*time.Second)
		m1.arm()
		time.Sleep(2 * time.Minute)
		key, at := m1.stalled()
		if key == "" {
			t.Fatal("m1 made no running write after it was armed")
		}
		tookOver := false
		for _, e := range f.events() {
			if e.run.Key != key || e.start.Before(at) {
				continue
			}
			if e.member == "m1" && e.start.Before(at.Add(time.Minute)) {
				t.Errorf("the stalled member ran %s (slot %v) %v after its stall began, after it lost the key", key, e.run.Slot, e.start.Sub(at))
			}
			tookOver = tookOver || (e.member != "m1" && e.run.Takeover)
		}
		if !tookOver {
			t.Errorf("key %s was not taken over by another member", key)
		}
		f.leaveAll()
		f.noOverlaps()
	})
}

// A member whose renewals stop (its renewal goroutine is stopped, its runs
// go on) during a run longer than the TTL: the run's context ends at the
// session's fence time, before the successor may start the key; runs longer
// than the TTL are not cut while renewals succeed.
func TestRunContextEndsAtFenceTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		ttl := 10 * time.Second
		f := newFleet(t, ctx, jobs.Config{Every: 10 * time.Minute, NoSpread: true, SessionTTL: ttl})
		f.runFor = func(string, jobs.Run) time.Duration { return 5 * time.Minute }
		f.start(1, keys("k", 4))
		f.start(1, nil)
		time.Sleep(10*time.Minute + 2*time.Minute) // runs 2 minutes in: past the TTL
		running := f.runningOn("m1")
		if len(running) == 0 {
			t.Fatal("m1 runs nothing")
		}
		g := f.member("m1").gate
		g.Pause()
		pausedAt := time.Now()
		time.Sleep(time.Minute)
		g.Resume()
		for _, e := range f.events() {
			if _, ok := running[e.run.Key]; !ok || e.member != "m1" || e.start.After(pausedAt) {
				continue
			}
			if e.stop.IsZero() || e.stop.After(pausedAt.Add(ttl)) {
				t.Errorf("m1's run of %s (stopped at %v) went on past its renewals' stop + TTL %v (%v); want it cancelled by the fence time",
					e.run.Key, e.stop, ttl, pausedAt.Add(ttl))
			}
		}
		f.leaveAll()
		f.noOverlaps()
	})
}
