package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd/herdtest"
	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// fleet runs jobs members on one in-process store, inside a synctest
// bubble, and records every run: starts and stops per key and member, and
// any moment when two runs of one key were under way at once.
type fleet struct {
	t     *testing.T
	ctx   context.Context
	st    *memstore.Store
	group string
	cfg   jobs.Config // template: schedule, timings
	// runFor is how long a run of key takes (nil: returns at once).
	runFor func(key string, r jobs.Run) time.Duration
	// fail, if set, makes a run fail with its error.
	fail func(r jobs.Run) error
	// wrap, if set, gives a member the store it uses, from the fleet's
	// store and the member's gate (a store that stalls the member).
	wrap func(member string, gate *herdtest.Gate, st store.Store) store.Store
	// clock, if set, gives a member its wall clock (nil: time.Now).
	clock func(member string) func() time.Time

	mu       sync.Mutex
	members  map[string]*fleetMember
	nextID   int
	running  map[string]string // key -> member running it
	runs     []runEvent
	overlaps []string
}

type fleetMember struct {
	s      *jobs.Scheduler
	cancel context.CancelFunc
	gate   *herdtest.Gate
}

// runEvent is one run as Run saw it.
type runEvent struct {
	member      string
	run         jobs.Run
	start, stop time.Time // stop is zero while running
	wall        time.Time // start on the member's wall clock
	err         error
}

func newFleet(t *testing.T, ctx context.Context, cfg jobs.Config) *fleet {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &fleet{t: t, ctx: ctx, st: memstore.New(), group: "jobs", cfg: cfg,
		members: map[string]*fleetMember{}, running: map[string]string{}}
}

func keys(prefix string, n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return ks
}

func (f *fleet) run(member string) func(ctx context.Context, r jobs.Run) error {
	return func(ctx context.Context, r jobs.Run) error {
		f.mu.Lock()
		if other, ok := f.running[r.Key]; ok {
			f.overlaps = append(f.overlaps, fmt.Sprintf("%v: %s started key %s (slot %v) while %s ran it", time.Now(), member, r.Key, r.Slot, other))
		}
		f.running[r.Key] = member
		i := len(f.runs)
		wall := time.Now()
		if f.clock != nil && f.clock(member) != nil {
			wall = f.clock(member)()
		}
		f.runs = append(f.runs, runEvent{member: member, run: r, start: time.Now(), wall: wall})
		f.mu.Unlock()
		var err error
		if f.runFor != nil {
			t := time.NewTimer(f.runFor(r.Key, r))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				err = ctx.Err()
			}
		}
		if err == nil && f.fail != nil {
			err = f.fail(r)
		}
		f.mu.Lock()
		if f.running[r.Key] == member {
			delete(f.running, r.Key)
		}
		f.runs[i].stop, f.runs[i].err = time.Now(), err
		f.mu.Unlock()
		return err
	}
}

// start starts n members; the first may set the keys (cfg.Keys).
func (f *fleet) start(n int, ks []string) []string {
	f.t.Helper()
	var ids []string
	for range n {
		f.mu.Lock()
		f.nextID++
		id := "m" + strconv.Itoa(f.nextID)
		f.mu.Unlock()
		cfg := f.cfg
		cfg.Store, cfg.Group, cfg.Member, cfg.Keys = f.st, f.group, id, ks
		cfg.Run = f.run(id)
		fm := &fleetMember{gate: &herdtest.Gate{}}
		herdtest.WithJobsGate(&cfg, fm.gate)
		if f.wrap != nil {
			cfg.Store = f.wrap(id, fm.gate, f.st)
		}
		if f.clock != nil {
			if now := f.clock(id); now != nil {
				jobs.SetClock(&cfg, now)
			}
		}
		ctx, cancel := context.WithCancel(f.ctx)
		s, err := jobs.Start(ctx, cfg)
		if err != nil {
			cancel()
			f.t.Fatalf("start %s: %v", id, err)
		}
		fm.s, fm.cancel = s, cancel
		f.mu.Lock()
		f.members[id] = fm
		f.mu.Unlock()
		ids = append(ids, id)
	}
	return ids
}

func (f *fleet) member(id string) *fleetMember {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.members[id]
}

func (f *fleet) drop(id string) *fleetMember {
	f.mu.Lock()
	defer f.mu.Unlock()
	fm := f.members[id]
	delete(f.members, id)
	return fm
}

// crash stops a member as a crash would: Start's context is cancelled.
func (f *fleet) crash(id string) {
	fm := f.drop(id)
	fm.cancel()
	<-fm.s.Done()
}

// leaveAll makes every member leave gracefully.
func (f *fleet) leaveAll() {
	f.t.Helper()
	f.mu.Lock()
	ids := make([]string, 0, len(f.members))
	for id := range f.members {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	slices.Sort(ids)
	var wg sync.WaitGroup
	for _, id := range ids {
		fm := f.drop(id)
		wg.Go(func() {
			if err := fm.s.Leave(f.ctx); err != nil {
				f.t.Errorf("leave %s: %v", id, err)
			}
			fm.cancel()
		})
	}
	wg.Wait()
}

// events returns a copy of the runs so far.
func (f *fleet) events() []runEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.runs)
}

// runningOn lists the keys member runs now, with their runs.
func (f *fleet) runningOn(member string) map[string]jobs.Run {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]jobs.Run{}
	for _, e := range f.runs {
		if e.member == member && e.stop.IsZero() {
			out[e.run.Key] = e.run
		}
	}
	return out
}

// noOverlaps fails the test if two runs of a key were ever under way at once.
func (f *fleet) noOverlaps() {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.overlaps) > 0 {
		f.t.Fatalf("%d overlapping runs; first: %s", len(f.overlaps), f.overlaps[0])
	}
}

// record reads key's record from the store (a claim would change it; the
// test reads the memstore's copy).
func (f *fleet) record(key string) jobs.Record {
	f.t.Helper()
	b, ok := f.st.StoredCheckpoint(f.group, key)
	if !ok {
		return jobs.Record{}
	}
	r, err := jobs.DecodeRecord(b)
	if err != nil {
		f.t.Fatalf("record of %s: %v", key, err)
	}
	return r
}

// logCounter is a slog handler that counts messages, for tests that check
// that something was logged.
type logCounter struct {
	mu    sync.Mutex
	count map[string]int
}

func newLogCounter() *logCounter { return &logCounter{count: map[string]int{}} }

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.count[r.Message]++
	l.mu.Unlock()
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }

func (l *logCounter) n(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count[msg]
}
