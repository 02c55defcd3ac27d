package herd_test

// The fleet the randomized fault test drives: its members, their joins, leaves, crashes, pauses and faults.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/herdtest"
	"github.com/herdhq/herd/internal/tracker"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// faultMember is one member of a schedule and the faults set on it.
type faultMember struct {
	m      *herd.Member
	cancel context.CancelFunc
	fault  *faultstore.Store
	gate   *herdtest.Gate
	paused bool
	cut    bool
	lat    time.Duration // latency set
	fail   float64       // failure rate set
}

// noteFaults tells the checker whether id has a fault set now.
func (f *faultFleet) noteFaults(id string, fm *faultMember) {
	f.chk.setFaulty(id, fm.paused || fm.cut || fm.lat > 0 || fm.fail > 0, false)
}

// faultFleet is the state of one schedule.
type faultFleet struct {
	t       *testing.T
	ctx     context.Context
	rng     *rand.Rand
	seed    uint64
	st      *memstore.Store
	chk     *faultChecker
	tr      *tracker.Tracker
	parts   []string
	members map[string]*faultMember
	all     []*faultMember // every member ever joined, to stop them all at the end
	nextID  int
	leaving sync.WaitGroup // graceful leaves under way
	steps   []string       // what happened, for a failure's report
	// skewed: the handlers report unequal loads (partition i: 1/(i+1)),
	// published every 10 s, so partitions also move for load; the
	// schedule then waits for every partition to run, not for the count
	// balance, and makes no measured change.
	skewed bool
}

const (
	faultGroup   = "g"
	faultTTL     = herd.DefaultSessionTTL
	faultMaxSize = 6 // members
)

func runFaultSchedule(t *testing.T, seed uint64, dataLoss bool) {
	runFaultScheduleWith(t, seed, dataLoss, false)
}

func runFaultScheduleWith(t *testing.T, seed uint64, dataLoss, skewed bool) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f := &faultFleet{
		t: t, ctx: ctx, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x6865726466)),
		st: memstore.New(), chk: newFaultChecker(), tr: tracker.New(), members: map[string]*faultMember{},
		skewed: skewed,
	}
	// Handlers' tickers keep virtual time going whatever else is stuck, so
	// a hang would spin until the test binary's timeout: stop it early. A
	// schedule takes about 10 minutes of virtual time.
	hang := time.AfterFunc(2*time.Hour, func() {
		panic(fmt.Sprintf("seed %d: the schedule did not end within 2 hours of virtual time; last steps:\n  %s",
			seed, strings.Join(f.steps[max(0, len(f.steps)-30):], "\n  ")))
	})
	defer hang.Stop()
	defer f.stopAll(cancel) // also after a failure: no goroutine may outlive the bubble
	start := time.Now()
	f.setPartitions(12 + f.rng.IntN(29))
	f.join(2 + f.rng.IntN(3))
	f.quiet("start")
	for round := range 3 {
		for range 6 + f.rng.IntN(10) {
			f.fault(dataLoss)
			f.sleep(time.Duration(100+f.rng.IntN(8000)) * time.Millisecond)
			f.check()
		}
		f.quiet(fmt.Sprintf("round %d", round))
		if !f.skewed {
			f.measured()
		}
	}
	for _, id := range f.ids() {
		fm := f.members[id]
		delete(f.members, id)
		if err := fm.m.Leave(ctx); err != nil {
			f.failNow("leave %s at the end: %v", id, err)
		}
	}
	f.check()
	f.chk.mu.Lock()
	defer f.chk.mu.Unlock()
	if os.Getenv("HERD_FAULT_VERBOSE") == "1" {
		t.Logf("steps:\n  %s", strings.Join(f.steps, "\n  "))
	}
	t.Logf("seed %d: %d steps over %v of virtual time; checkpoints: %d accepted, %d rejected, %d fenced; "+
		"%d handlers started beside a stalled member's; %d partitions restarted below a checkpoint lost with the store's data; "+
		"%d overlaps or restarts due to a member joining just after a loss; %d restarts after a loss from the checkpoint held",
		seed, len(f.steps), time.Since(start), f.chk.counts.accepted, f.chk.counts.rejected, f.chk.counts.fenced, f.chk.counts.stalled, f.chk.lost, f.chk.blind, f.chk.kept)
}

// stopAll crashes every member still running, lifting the faults that
// would keep its goroutines blocked, and waits for all of them.
func (f *faultFleet) stopAll(cancel context.CancelFunc) {
	cancel()
	for _, fm := range f.all {
		fm.gate.Resume()
		fm.fault.SetCut(false)
		fm.fault.SetLatency(0)
	}
	for _, fm := range f.all {
		<-fm.m.Done()
	}
	f.leaving.Wait()
}

func (f *faultFleet) logf(format string, args ...any) {
	f.steps = append(f.steps, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

func (f *faultFleet) failNow(format string, args ...any) {
	f.t.Helper()
	from := max(0, len(f.steps)-30)
	test, _, _ := strings.Cut(f.t.Name(), "/")
	f.t.Fatalf("seed %d: %s\nlast steps:\n  %s\nrerun: HERD_FAULT_SEED=%d go test -run '^%s$' -v .",
		f.seed, fmt.Sprintf(format, args...), strings.Join(f.steps[from:], "\n  "), f.seed, test)
}

func (f *faultFleet) sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// check runs the checks of every step.
func (f *faultFleet) check() {
	f.t.Helper()
	snap, err := f.st.Snapshot(f.ctx, faultGroup)
	if err != nil {
		f.failNow("snapshot: %v", err)
	}
	f.chk.checkStore(snap)
	f.chk.mu.Lock()
	errs := slices.Clone(f.chk.errs)
	f.chk.mu.Unlock()
	if len(errs) > 0 {
		f.failNow("%d violations, the first: %s", len(errs), strings.Join(errs[:min(len(errs), 5)], "\n  "))
	}
}

func (f *faultFleet) setPartitions(n int) {
	ps := herd.Numbered(n)
	f.parts = f.parts[:0]
	for _, p := range ps {
		f.parts = append(f.parts, p.ID)
	}
	if _, err := f.st.SetPartitions(f.ctx, faultGroup, store.PartitionSet{Partitions: ps}); err != nil {
		f.failNow("set partitions: %v", err)
	}
}

func (f *faultFleet) ids() []string {
	ids := make([]string, 0, len(f.members))
	for id := range f.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (f *faultFleet) pick() (string, *faultMember) {
	ids := f.ids()
	id := ids[f.rng.IntN(len(ids))]
	return id, f.members[id]
}

// handler checkpoints a counter every second and a last time when
// cancelled, each time with a context of its own. Its work is the same on
// every partition, and it says so (ReportLoad): the rate of its
// checkpoints, the load measured otherwise, varies with the faults (a
// paused member, a slow store), and the balance by load would act on it,
// where the checks of this test expect the count balance. The members
// still publish the loads, through the faults.
func (f *faultFleet) handler(id string) herd.Handler {
	return func(c *herd.Claim) error {
		load := 1.0
		if i, err := strconv.Atoi(c.Partition); err == nil && f.skewed {
			load = 1 / float64(i+1)
		}
		c.ReportLoad(load)
		r := f.chk.started(id, c)
		defer f.chk.stopped(r)
		pos := faultDecode(c.LastCheckpoint())
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-c.Context().Done():
				f.chk.checkpoint(r, c, pos+1)
				return nil
			case <-tick.C:
				pos++
				f.chk.checkpoint(r, c, pos)
			}
		}
	}
}

func (f *faultFleet) join(n int) {
	for range n {
		f.nextID++
		id := "m" + strconv.Itoa(f.nextID)
		fm := &faultMember{fault: faultstore.Wrap(f.st, faultstore.WithSeed(f.seed*1000+uint64(f.nextID))), gate: &herdtest.Gate{}}
		ctx, cancel := context.WithCancel(f.ctx)
		cfg := herd.Config{
			Group: faultGroup, Member: id, Partitions: herd.Numbered(len(f.parts)),
			Handler: f.tr.Wrap(id, f.handler(id)),
			Logger:  faultLogger(id),
		}
		if f.skewed {
			cfg.LoadReportInterval = 10 * time.Second
		}
		herdtest.WithGate(&cfg, fm.gate)
		m, err := herd.Join(ctx, fm.fault, cfg)
		if err != nil {
			cancel()
			f.failNow("join %s: %v", id, err)
		}
		fm.m, fm.cancel = m, cancel
		f.members[id] = fm
		f.all = append(f.all, fm)
		f.chk.mu.Lock()
		f.chk.joined[id] = time.Now()
		f.chk.mu.Unlock()
		f.logf("%s joins", id)
	}
}

// leave starts a graceful leave of id; if it cannot finish in 3 TTLs (its
// store is cut), the member is crashed.
func (f *faultFleet) leave(id string) {
	fm := f.members[id]
	delete(f.members, id)
	f.chk.setFaulty(id, true, true)
	f.logf("%s leaves", id)
	f.leaving.Go(func() {
		ctx, cancel := context.WithTimeout(f.ctx, 3*faultTTL)
		defer cancel()
		if err := fm.m.Leave(ctx); err != nil {
			fm.cancel()
			<-fm.m.Done()
		}
	})
}

func (f *faultFleet) crash(id string) {
	fm := f.members[id]
	delete(f.members, id)
	f.chk.setFaulty(id, true, true)
	f.logf("%s crashes", id)
	fm.cancel()
	if fm.paused {
		// A crashed process's handlers die with it; here they return
		// once the gate lets their last checkpoint through (refused).
		fm.gate.Resume()
		f.chk.setPaused(id, false)
	}
	<-fm.m.Done()
}

func (f *faultFleet) setPause(id string, fm *faultMember, paused bool) {
	fm.paused = paused
	if paused {
		f.chk.setPaused(id, true)
		fm.gate.Pause()
		return
	}
	fm.gate.Resume()
	f.chk.setPaused(id, false)
}
