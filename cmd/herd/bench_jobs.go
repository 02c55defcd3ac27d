package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
)

// The jobs scenario of bench: 10,000 keys on 10 members, each key once per
// --every (default 1m: "every hour", scaled down so that a run of the
// bench takes minutes), spread by key. After the members have placed the
// keys and one interval has passed (every key has run once, so records
// exist), it measures two intervals: the lateness of first attempts (start
// of Run minus the slot's due time) and the store operations of every
// member per run. The runs themselves do nothing.

const (
	// jobsLeaveTimeout bounds each member's Leave at the end: each hands
	// off a tenth of the keys at once, which a loaded machine may take a
	// while to do.
	jobsLeaveTimeout = 30 * time.Second
	jobsBenchMembers = 10
	jobsBenchKeys    = 10_000
	defaultJobsEvery = time.Minute
)

// jobsFigures are the jobs scenario's own figures.
type jobsFigures struct {
	EverySeconds           float64 `json:"every_seconds"`
	Runs                   int     `json:"runs"`
	KeysRun                int     `json:"keys_run"`
	LatenessP50Seconds     float64 `json:"lateness_p50_seconds"`
	LatenessP99Seconds     float64 `json:"lateness_p99_seconds"`
	LatenessMaxSeconds     float64 `json:"lateness_max_seconds"`
	StoreOpsPerRun         float64 `json:"store_ops_per_run"`
	CheckpointWritesPerRun float64 `json:"checkpoint_writes_per_run"`
}

// checkpointCounter counts the Checkpoint calls made through it, by the
// run whose record each writes.
type checkpointCounter struct {
	store.Store
	w *runWrites
}

func (c checkpointCounter) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	c.w.wrote(partition, epoch, value)
	return c.Store.Checkpoint(ctx, group, partition, epoch, value)
}

// jobsOutcomeWait bounds each wait after the measured window: for the runs
// of its last slots to start (they start late under load), then for the
// outcome writes of the runs under way.
const jobsOutcomeWait = 10 * time.Second

// jobsBench is one run of the scenario.
type jobsBench struct {
	conn  *connector
	group string
	every time.Duration
	ttl   time.Duration
	keys  []string

	writes  *runWrites
	counted []*faultstore.Store
	raw     []store.Store
	members []*jobs.Scheduler
	cancels []context.CancelFunc

	mu       sync.Mutex
	from, to time.Time            // the measured window of slots (zero: not measuring)
	next     map[string]time.Time // the slot after each key's latest run
	runs     int
	lates    []time.Duration
	keysRun  map[string]bool
	measured []runID // the runs of the window's slots
}

func runJobsScenario(ctx context.Context, conn *connector, o benchOpts) (_ benchResult, err error) {
	n := jobsBenchKeys
	if o.partitions > 0 {
		n = o.partitions
	}
	every := o.every
	if every == 0 {
		every = defaultJobsEvery
	}
	if conn.mem == nil {
		return runJobsProcScenario(ctx, conn, o, n, every)
	}
	b := &jobsBench{conn: conn, group: fmt.Sprintf("bench-jobs-%d", time.Now().UnixNano()), every: every, ttl: o.ttl, keysRun: map[string]bool{},
		next: map[string]time.Time{}, writes: newRunWrites()}
	for i := range n {
		b.keys = append(b.keys, fmt.Sprintf("key-%d", i))
	}
	defer func() { err = errors.Join(err, b.close()) }()
	began := time.Now()
	if err := b.start(ctx); err != nil {
		return benchResult{}, err
	}
	if err := b.waitPlaced(ctx, o.ttl+60*time.Second+balanceAllowance(n)); err != nil {
		return benchResult{}, err
	}
	placed := time.Since(began)
	if err := sleepCtx(ctx, every); err != nil { // every key runs once: its record exists
		return benchResult{}, err
	}
	runs, lates, keysRun, ops, cps, err := b.measure(ctx)
	if err != nil {
		return benchResult{}, err
	}
	return jobsResult(conn, o, n, every, placed, runs, lates, keysRun, ops, cps, false), nil
}

// measure measures the runs due in the next two intervals: their number,
// the lateness of first attempts, the keys run, the store operations and
// the record writes. A run is in the window by its slot, not by when it
// started, and its writes are counted by the run each names, so that the
// window's edges cut no run: with --every 1s every key is due at the same
// whole second (slots are spread in whole seconds), and under load a window
// of start times with an edge inside that burst held 74 to 134 runs, and
// 1.66 to 2.10 writes per run, where 100 runs made 2 each.
func (b *jobsBench) measure(ctx context.Context) (runs int, lates []time.Duration, keysRun int, ops, cps int64, err error) {
	ops0, calls0 := b.storeOps(), b.writes.calls.Load()
	b.mu.Lock()
	b.from = time.Now()
	b.to = b.from.Add(2 * b.every)
	b.mu.Unlock()
	if err := sleepCtx(ctx, time.Until(b.to)); err != nil {
		return 0, nil, 0, 0, 0, err
	}
	ops, calls := b.storeOps()-ops0, b.writes.calls.Load()-calls0
	if err := b.waitWindowRun(ctx, jobsOutcomeWait); err != nil {
		return 0, nil, 0, 0, 0, err
	}
	b.mu.Lock()
	runs, lates, keysRun, measured := b.runs, slices.Clone(b.lates), len(b.keysRun), b.measured
	b.mu.Unlock()
	if runs == 0 {
		return 0, nil, 0, 0, 0, errors.New("no run in the measured window")
	}
	// The record writes of the runs measured, those made before the window
	// began and after it ended included; the store operations are the
	// others made in the window, and those writes.
	cps = b.writes.of(ctx, measured, jobsOutcomeWait)
	return runs, lates, keysRun, ops + cps - calls, cps, nil
}

// waitWindowRun waits (at most limit) until every key has started the runs
// of its slots in the window: until its next slot, that of the latest run
// it started plus its period (the bench's schedule is an interval), is at
// or after the window's end.
func (b *jobsBench) waitWindowRun(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		b.mu.Lock()
		left := 0
		for _, k := range b.keys {
			if b.next[k].Before(b.to) {
				left++
			}
		}
		b.mu.Unlock()
		if left == 0 || time.Now().After(deadline) {
			return nil // the figures say what ran
		}
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
}

// jobsResult is the jobs scenario's result from what it measured.
func jobsResult(conn *connector, o benchOpts, n int, every, placed time.Duration, runs int, lates []time.Duration,
	keysRun int, ops, cps int64, processes bool) benchResult {
	slices.Sort(lates)
	q := func(p float64) float64 { return lates[min(len(lates)-1, int(p*float64(len(lates))))].Seconds() }
	return benchResult{
		Scenario:          "jobs",
		Store:             conn.name(),
		Partitions:        n,
		MembersBefore:     jobsBenchMembers,
		MembersAfter:      jobsBenchMembers,
		SecondsToBalance:  placed.Seconds(),
		SessionTTLSeconds: o.ttl.Seconds(),
		MemberProcesses:   processes,
		Jobs: &jobsFigures{
			EverySeconds:           every.Seconds(),
			Runs:                   runs,
			KeysRun:                keysRun,
			LatenessP50Seconds:     q(0.50),
			LatenessP99Seconds:     q(0.99),
			LatenessMaxSeconds:     lates[len(lates)-1].Seconds(),
			StoreOpsPerRun:         float64(ops) / float64(runs),
			CheckpointWritesPerRun: float64(cps) / float64(runs),
		},
	}
}

func (b *jobsBench) run(_ context.Context, r jobs.Run) error {
	late := time.Since(r.Slot)
	b.mu.Lock()
	defer b.mu.Unlock()
	if next := r.Slot.Add(r.Period); next.After(b.next[r.Key]) {
		b.next[r.Key] = next
	}
	if !b.from.IsZero() && !r.Slot.Before(b.from) && r.Slot.Before(b.to) {
		b.runs++
		b.keysRun[r.Key] = true
		b.measured = append(b.measured, idOf(r))
		if r.Attempt == 1 {
			b.lates = append(b.lates, late)
		}
	}
	return nil
}

// start starts the members, at once; the first sets the keys.
func (b *jobsBench) start(ctx context.Context) error {
	for i := range jobsBenchMembers {
		raw, err := b.conn.connect(ctx)
		if err != nil {
			return err
		}
		counted := faultstore.Wrap(checkpointCounter{Store: raw, w: b.writes})
		b.raw = append(b.raw, raw)
		b.counted = append(b.counted, counted)
		cfg := jobs.Config{
			Store: counted, Group: b.group, Member: fmt.Sprintf("m%d", i+1),
			Every: b.every, Run: b.run, SessionTTL: b.ttl,
			Logger: slog.New(slog.DiscardHandler),
		}
		if i == 0 {
			cfg.Keys = b.keys
		}
		mctx, cancel := context.WithCancel(context.Background())
		s, err := jobs.Start(mctx, cfg)
		if err != nil {
			cancel()
			return fmt.Errorf("member %s: %w", cfg.Member, err)
		}
		b.members = append(b.members, s)
		b.cancels = append(b.cancels, cancel)
	}
	return nil
}

// waitPlaced waits until every key is owned and the spread is fair.
func (b *jobsBench) waitPlaced(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	lo, hi := len(b.keys)/len(b.members), (len(b.keys)+len(b.members)-1)/len(b.members)
	for {
		total, fair := 0, true
		for _, s := range b.members {
			n := len(s.Member().Owned())
			total += n
			fair = fair && n >= lo && n <= hi
		}
		if total == len(b.keys) && fair {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("keys not placed within %v: %d of %d owned", limit, total, len(b.keys))
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// storeOps is the store operations of every member so far.
func (b *jobsBench) storeOps() int64 {
	var n int64
	for _, st := range b.counted {
		o := st.Ops()
		n += o.Reads + o.Writes + o.Feeds
	}
	return n
}

// close makes every member leave (bounded), then deletes the group.
func (b *jobsBench) close() error {
	var errs []error
	var wg sync.WaitGroup
	var failed atomic.Int32
	for _, s := range b.members {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), jobsLeaveTimeout+balanceAllowance(len(b.keys)))
			defer cancel()
			if s.Leave(ctx) != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	for _, c := range b.cancels {
		c()
	}
	for _, s := range b.members {
		<-s.Done()
	}
	if n := failed.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("%d of %d members did not leave in time", n, len(b.members)))
	}
	for _, st := range b.raw {
		_ = st.Close()
	}
	dctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	st, err := b.conn.connect(dctx)
	if err == nil {
		err = herd.DeleteGroup(dctx, st, b.group, true)
		st.Close()
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("deleting group %q (delete it with herd group delete --force): %w", b.group, err))
	}
	return errors.Join(errs...)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// printJobsLine prints the jobs scenario's figures under the table.
func printJobsLine(out io.Writer, r benchResult) {
	j := r.Jobs
	fmt.Fprintf(out, "\njobs (%d keys every %v on %d members, %d runs measured over two intervals, %d keys): "+
		"lateness p50 %.1f ms, p99 %.1f ms, max %.1f ms; %.2f store ops per run (%.2f checkpoint writes)\n",
		r.Partitions, time.Duration(j.EverySeconds*float64(time.Second)), r.MembersAfter, j.Runs, j.KeysRun,
		j.LatenessP50Seconds*1000, j.LatenessP99Seconds*1000, j.LatenessMaxSeconds*1000, j.StoreOpsPerRun, j.CheckpointWritesPerRun)
}
