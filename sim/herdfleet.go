package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/herdtest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// Herd runs herd's real member code: every member is a herd.Member joined
// to one in-process memstore through its own faultstore wrapper (so that
// latency, failures and outages apply per connection), with a handler that
// processes its partition and checkpoints every env.CheckpointEvery, and a
// final checkpoint on handoff.
//
// It runs only in virtual time: the fleet's goroutines use time.Now and
// timers, so the run must happen inside a testing/synctest bubble, with
// Idle = synctest.Wait. The fleet installs a Driver that sleeps the runner
// goroutine until each scheduler time (the bubble's clock advances while
// everything is blocked) and then waits for the members to go idle.
//
// Faults map onto the member as follows:
//   - Crash cancels the member's Join context (no release, no final
//     checkpoint: the handler is told its process died);
//   - Pause closes the member's herdtest.Gate (SIGSTOP);
//   - SetSlow adds env.SlowLag to every store call of the member: inside a
//     bubble a goroutine cannot hog a CPU (a busy loop would stop virtual
//     time), so starvation is approximated by late requests and replies;
//   - JumpClock does nothing: herd never compares a wall clock with the
//     store's, and in a bubble one member's clock cannot jump alone;
//   - SetStore sets latency, failure rate and cut on every connection.
//
// Every connection queues on one store server (faultstore.Server with
// Server's service times, default faultstore.RedisCost): a call's reply
// waits for the calls before it and for its own service time, as on one
// Redis core, so what the fleet asks of the store shows in its times.
type Herd struct {
	// Config is the template of every member's configuration; Group,
	// Member, Handler, Logger and the pause hook (herdtest.WithGate) are
	// set by the fleet.
	Config herd.Config
	// Idle waits until every goroutine of the fleet is blocked:
	// synctest.Wait. Required.
	Idle func()
	// Bubble, if set, runs a whole run inside a new bubble (for RunAll):
	// func(run func()) { synctest.Test(t, func(*testing.T) { run() }) }.
	Bubble func(run func())
	// Server is the service time of the store server's operations (nil:
	// faultstore.RedisCost; a zero Cost makes them free).
	Server *faultstore.Cost
}

// InBubble implements Bubbler.
func (h Herd) InBubble(run func()) {
	if h.Bubble == nil {
		run()
		return
	}
	h.Bubble(run)
}

func (h Herd) Name() string { return "herd" }

func (h Herd) Describe() string {
	ttl := h.Config.SessionTTL
	if ttl == 0 {
		ttl = herd.DefaultSessionTTL
	}
	return "herd member code on memstore + faultstore: session TTL " + fmtDur(ttl) + ", fenced checkpoints, handoff on leave, one store server (" + h.serverCost().String() + ")"
}

func (h Herd) serverCost() faultstore.Cost {
	if h.Server != nil {
		return *h.Server
	}
	return faultstore.RedisCost
}

// FailoverBound: a crashed member's session expires after SessionTTL and
// its partitions are claimed at once; 5 s covers the reconcile and claims.
func (h Herd) FailoverBound() time.Duration {
	ttl := h.Config.SessionTTL
	if ttl == 0 {
		ttl = herd.DefaultSessionTTL
	}
	return ttl + 5*time.Second
}

func (h Herd) NewFleet(env *Env) (Fleet, error) {
	if h.Idle == nil {
		return nil, errors.New("herd fleet: Idle is required (run inside a synctest bubble with Idle = synctest.Wait)")
	}
	if need, avail := replicaBytes*int64(env.Members)*int64(env.Partitions), availableMemory(); avail > 0 && need > avail*4/5 {
		return nil, fmt.Errorf("herd fleet: %d members x %d partitions need about %.0f GB in one process (every member keeps its own copy of the group, about %d bytes a record), more than the %.0f GB available: run the members as processes of their own (herd bench) or a smaller scenario",
			env.Members, env.Partitions, float64(need)/1e9, replicaBytes, float64(avail)/1e9)
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	f := &herdFleet{
		h: h, env: env, start: start, ctx: ctx, cancel: cancel,
		st: memstore.New(), members: map[string]*herdMember{}, faults: env.Store,
		server: faultstore.NewServer(h.serverCost()),
	}
	env.Rec.SetClock(func() time.Duration { return time.Since(start) })
	env.Sched.SetDriver(f)
	return f, nil
}

type herdFleet struct {
	h      Herd
	env    *Env
	start  time.Time
	ctx    context.Context
	cancel context.CancelFunc
	st     *memstore.Store
	server *faultstore.Server // shared by every member's connection

	mu      sync.Mutex
	members map[string]*herdMember // current incarnation per id
	all     []*herdMember
	faults  StoreFaults
	errs    []error
	wg      sync.WaitGroup
}

type herdMember struct {
	id      string
	fs      *faultstore.Store
	gate    *herdtest.Gate
	cancel  context.CancelFunc
	crashed atomic.Bool
	slow    bool
	joined  chan struct{} // closed when Join returned
	m       *herd.Member  // set before joined is closed; nil if Join failed
}

// AdvanceTo implements Driver.
func (f *herdFleet) AdvanceTo(t time.Duration) {
	if d := t - time.Since(f.start); d > 0 {
		time.Sleep(d)
	}
	f.h.Idle()
}

func (f *herdFleet) fail(err error) {
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
}

func (f *herdFleet) SetPartitions(ps []store.Partition) error {
	_, err := f.st.SetPartitions(f.ctx, f.env.Group, store.PartitionSet{Partitions: ps})
	return err
}

func (f *herdFleet) applyFaults(hm *herdMember) {
	lat := f.faults.Latency
	if hm.slow {
		lat += f.env.SlowLag
	}
	hm.fs.SetLatency(lat)
	hm.fs.SetFailureRate(f.faults.FailureRate)
	hm.fs.SetCut(f.faults.Down)
}

func (f *herdFleet) AddMember(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old := f.members[id]; old != nil {
		return fmt.Errorf("member %s is already running", id)
	}
	hm := &herdMember{
		id:     id,
		fs:     faultstore.Wrap(f.st, faultstore.WithSeed(f.env.Rand.Uint64()), faultstore.WithServer(f.server)),
		gate:   &herdtest.Gate{},
		joined: make(chan struct{}),
	}
	f.applyFaults(hm)
	ctx, cancel := context.WithCancel(f.ctx)
	hm.cancel = cancel
	f.members[id] = hm
	f.all = append(f.all, hm)
	cfg := f.h.Config
	cfg.Group, cfg.Member = f.env.Group, id
	herdtest.WithGate(&cfg, hm.gate)
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Handler = f.handler(hm)
	st := hm.fs
	// Join waits for the store: it runs on its own goroutine so that the
	// runner's time does not move inside a step.
	f.wg.Go(func() {
		defer close(hm.joined)
		m, err := herd.Join(ctx, st, cfg)
		if err != nil {
			if ctx.Err() == nil {
				f.fail(fmt.Errorf("join %s: %w", id, err))
			}
			return
		}
		hm.m = m
	})
	return nil
}

func (f *herdFleet) take(id string) (*herdMember, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hm := f.members[id]
	if hm == nil {
		return nil, fmt.Errorf("no running member %s", id)
	}
	delete(f.members, id)
	return hm, nil
}

func (f *herdFleet) Leave(id string) error {
	hm, err := f.take(id)
	if err != nil {
		return err
	}
	f.wg.Go(func() {
		<-hm.joined
		if hm.m == nil {
			return
		}
		if err := hm.m.Leave(f.ctx); err != nil && f.ctx.Err() == nil {
			f.fail(fmt.Errorf("leave %s: %w", id, err))
		}
		hm.cancel()
	})
	return nil
}

func (f *herdFleet) Crash(id string) error {
	hm, err := f.take(id)
	if err != nil {
		return err
	}
	hm.crashed.Store(true)
	hm.cancel()
	return nil
}

func (f *herdFleet) running(id string) (*herdMember, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hm := f.members[id]
	if hm == nil {
		return nil, fmt.Errorf("no running member %s", id)
	}
	return hm, nil
}

func (f *herdFleet) Pause(id string) error {
	hm, err := f.running(id)
	if err != nil {
		return err
	}
	hm.gate.Pause()
	return nil
}

func (f *herdFleet) Resume(id string) error {
	hm, err := f.running(id)
	if err != nil {
		return err
	}
	hm.gate.Resume()
	return nil
}

func (f *herdFleet) SetSlow(id string, slow bool) error {
	hm, err := f.running(id)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	hm.slow = slow
	f.applyFaults(hm)
	return nil
}

func (f *herdFleet) JumpClock(id string, d time.Duration) error {
	_, err := f.running(id)
	return err
}

func (f *herdFleet) SetStore(sf StoreFaults) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = sf
	for _, hm := range f.members {
		f.applyFaults(hm)
	}
	return nil
}

func (f *herdFleet) Ops() Ops {
	f.mu.Lock()
	defer f.mu.Unlock()
	var o Ops
	for _, hm := range f.all {
		c := hm.fs.Ops()
		o.Reads += c.Reads
		o.LogReads += c.Feeds
		o.Writes += c.Writes
		o.Failed += c.Failed
		o.Rows += c.Rows
	}
	for _, hm := range f.all {
		o.Checkpoints += hm.fs.Ops().Checkpoints // when they reach the store, as the writes
	}
	o.Writes -= o.Checkpoints
	o.ServerBusy = f.server.Busy()
	return o
}

func (f *herdFleet) Close() error {
	f.cancel()
	f.mu.Lock()
	all := append([]*herdMember(nil), f.all...)
	f.mu.Unlock()
	for _, hm := range all {
		<-hm.joined
		if hm.m != nil {
			<-hm.m.Done()
		}
	}
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.errs...)
}

// handler processes a partition: its position advances while the member
// runs (not while paused), a checkpoint every env.CheckpointEvery, a final
// one when the partition is handed off.
func (f *herdFleet) handler(hm *herdMember) herd.Handler {
	rec := f.env.Rec
	step := uint64(f.env.CheckpointEvery / time.Millisecond)
	return func(c *herd.Claim) error {
		rec.Start(hm.id, c.Partition, c.Epoch)
		defer rec.Stop(hm.id, c.Partition)
		var pos uint64
		if b := c.LastCheckpoint(); len(b) == 8 {
			pos = binary.BigEndian.Uint64(b)
		}
		write := func(ctx context.Context) {
			err := c.Checkpoint(ctx, binary.BigEndian.AppendUint64(nil, pos))
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return // never reached the store
			}
			rec.Checkpoint(hm.id, c.Partition, c.Epoch, pos, err == nil)
		}
		t := time.NewTicker(f.env.CheckpointEvery)
		defer t.Stop()
		for {
			select {
			case <-c.Context().Done():
				if hm.crashed.Load() {
					return nil // the process is dead: nothing more is written
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				write(ctx)
				cancel()
				return nil
			case <-t.C:
				if hm.gate.Paused() {
					continue
				}
				pos += step
				write(c.Context())
			}
		}
	}
}

// replicaBytes is about what a member's copy of the group costs per
// partition: its record, its partition and their share of the queues (the
// large run of 1,000 members on 100,000 partitions reached 24 GB), and the
// entry of the record in the copy's index (store.Snapshot.ApplyAll).
const replicaBytes = 300

// availableMemory is MemAvailable from /proc/meminfo in bytes (0 if it
// cannot be read).
func availableMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n * 1024
				}
			}
		}
	}
	return 0
}
