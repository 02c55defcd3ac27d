package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/tracker"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
)

// cluster runs members of one group inside this process and measures them
// through their handlers. Its members live until close, not until the
// command's context ends: on Ctrl-C the command stops measuring and close
// makes them leave gracefully, then deletes the group.
type cluster struct {
	ctx     context.Context // the members' lifetime: cancelled by close
	kill    context.CancelFunc
	group   string
	parts   []string
	cfg     herd.Config // template: timings
	connect func(ctx context.Context) (store.Store, error)
	tr      *tracker.Tracker
	handler herd.Handler // inner handler (nil: wait for cancellation)
	mu      sync.Mutex
	members map[string]*running
	nextID  int
	counted []*faultstore.Store // every member's store handle, for operation counts
	// serverCPU reads the store server's CPU time so far (nil if the store
	// cannot tell): a rebalance's cost to the server, whoever else uses it.
	serverCPU func(context.Context) (time.Duration, error)
	touched   bool // the store was reached: close deletes the group
}

type running struct {
	m      *herd.Member
	st     store.Store
	cancel context.CancelFunc
}

// step is the outcome of one change to the fleet.
type step struct {
	Elapsed       time.Duration
	Settled       time.Duration // until the last member read the last entry of the change
	Moves         int
	MinMoves      int
	MaxConcurrent int
	Members       int   // members after the change
	Ops           int64 // store operations of every member until balanced
	// FullReads: of which reads of the group's records. Member processes
	// count reads of the whole group (Snapshot) alone, RecordReads apart;
	// members in this process count both as FullReads.
	FullReads   int64
	RecordReads int64
	Rows        int64 // records those reads and the log reads returned
	// ServerCPU is the store server's CPU time until balanced (nil if the
	// store does not report it, see watchServerCPU).
	ServerCPU *time.Duration
	// Member processes only (procFleet): members that failed to join, and
	// the CPU seconds each member process used in the step (median, most)
	// and the largest peak RSS of one, in bytes.
	Processes         bool
	JoinFailures      int
	CPUMedian, CPUMax float64
	PeakRSS           uint64
	// Takeover: until every partition of the members killed in the step
	// ran again elsewhere (0: none killed, or not measured).
	Takeover time.Duration
}

func newCluster(group string, partitions int, cfg herd.Config, connect func(context.Context) (store.Store, error)) *cluster {
	ctx, kill := context.WithCancel(context.Background())
	c := &cluster{ctx: ctx, kill: kill, group: group, cfg: cfg, connect: connect, tr: tracker.New(), members: map[string]*running{}}
	for _, p := range herd.Numbered(partitions) {
		c.parts = append(c.parts, p.ID)
	}
	return c
}

// setup writes the partition set.
func (c *cluster) setup(ctx context.Context) error {
	st, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	c.touched = true
	_, err = st.SetPartitions(ctx, c.group, store.PartitionSet{Partitions: herd.Numbered(len(c.parts))})
	return err
}

// live lists the running members' ids, sorted.
func (c *cluster) live() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.members))
	for id := range c.members {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if len(ids[i]) != len(ids[j]) {
			return len(ids[i]) < len(ids[j])
		}
		return ids[i] < ids[j]
	})
	return ids
}

// join starts n new members at once and returns their ids.
func (c *cluster) join(n int) ([]string, error) {
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range ids {
		c.mu.Lock()
		c.nextID++
		ids[i] = fmt.Sprintf("m%d", c.nextID)
		c.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.start(ids[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func (c *cluster) start(id string) error {
	raw, err := c.connect(c.ctx)
	if err != nil {
		return err
	}
	st := faultstore.Wrap(raw) // no faults: it counts the member's store operations
	c.mu.Lock()
	c.counted = append(c.counted, st)
	c.mu.Unlock()
	cfg := c.cfg
	cfg.Group = c.group
	cfg.Member = id
	cfg.Handler = c.tr.Wrap(id, c.handler)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	m, err := herd.Join(ctx, st, cfg)
	if err != nil {
		cancel()
		raw.Close()
		return fmt.Errorf("member %s: %w", id, err)
	}
	c.mu.Lock()
	c.members[id] = &running{m: m, st: raw, cancel: cancel}
	c.mu.Unlock()
	return nil
}

func (c *cluster) remove(id string) *running {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.members[id]
	delete(c.members, id)
	return r
}

// leave makes a member leave gracefully. If that takes longer than
// leaveTimeout, the member is stopped as in a crash (its session then
// expires in the store). Ctrl-C does not cut a leave short: a graceful leave
// is what it does too.
func (c *cluster) leave(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout+balanceAllowance(len(c.parts)))
	defer cancel()
	r := c.remove(id)
	if r == nil {
		return fmt.Errorf("no member %s", id)
	}
	err := r.m.Leave(ctx)
	r.cancel()
	<-r.m.Done()
	r.st.Close()
	return err
}

// crash stops a member without leaving: its session expires in the store.
func (c *cluster) crash(id string) error {
	r := c.remove(id)
	if r == nil {
		return fmt.Errorf("no member %s", id)
	}
	r.cancel()
	<-r.m.Done()
	return r.st.Close()
}

// Bounds of close: how long members get to leave gracefully (plus
// balanceAllowance for the partitions), and how long deleting the group may
// take.
const (
	leaveTimeout  = 5 * time.Second
	deleteTimeout = 5 * time.Second
)

// close makes every member leave gracefully (in parallel, bounded by
// leaveTimeout), stops those that did not make it as a crash would, then
// deletes the group from the store (forced: a member stopped that way may
// still have a live session). It logs nothing; the error, if any, says in one
// line what was left undone.
func (c *cluster) close() error {
	ids := c.live()
	var failed atomic.Int32
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.leave(id) != nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	c.kill() // members whose Leave timed out stop now, as in a crash
	var errs []error
	if n := failed.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("%d of %d members did not leave within %v", n, len(ids), leaveTimeout+balanceAllowance(len(c.parts))))
	}
	if !c.touched {
		return errors.Join(errs...)
	}
	dctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	st, err := c.connect(dctx)
	if err == nil {
		err = herd.DeleteGroup(dctx, st, c.group, true)
		st.Close()
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("deleting group %q (delete it with herd group delete --force): %w", c.group, err))
	}
	return errors.Join(errs...)
}

// measure applies change to the fleet and waits until it is balanced again,
// then until it is settled (see settle).
// The minimum number of moves is the partitions of members that are gone
// plus what balance.MinMoves says for the rest.
func (c *cluster) measure(ctx context.Context, timeout time.Duration, change func() error) (step, error) {
	before := c.tr.Owners()
	c.tr.Reset()
	counts0, cpu0, cpuErr := c.storeCounts(), time.Duration(0), error(nil)
	if c.serverCPU != nil {
		cpu0, cpuErr = c.serverCPU(ctx)
	}
	start := time.Now()
	if err := change(); err != nil {
		return step{}, err
	}
	after := c.live()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.tr.WaitBalanced(wctx, c.parts, after); err != nil {
		return step{}, err
	}
	s := step{Elapsed: time.Since(start), Moves: c.tr.Moves(), MaxConcurrent: c.tr.MaxConcurrent(), Members: len(after)}
	s.MinMoves = tracker.MinMoves(c.parts, before, after)
	// Balanced is not the end of the change: every member's copy of the
	// group still reads the entries it made (a first placement of 100,000
	// partitions is 100,000 entries for each of 100 members). The next
	// change starts from a settled fleet, as it would in production, and
	// this one's cost to the store counts all of its entries.
	settledAt, err := c.settle(wctx)
	if err != nil {
		return step{}, err
	}
	s.Settled = settledAt.Sub(start)
	counts := c.storeCounts()
	s.Ops = counts.Reads + counts.Feeds + counts.Writes - (counts0.Reads + counts0.Feeds + counts0.Writes)
	s.FullReads = counts.Reads - counts0.Reads
	s.Rows = counts.Rows - counts0.Rows
	if c.serverCPU != nil && cpuErr == nil {
		if cpu1, err := c.serverCPU(ctx); err == nil {
			d := cpu1 - cpu0
			s.ServerCPU = &d
		}
	}
	return s, nil
}

// settleQuiet is how long no member may read anything, of the group or of
// its log, for the fleet to count as settled: a member behind the log
// reads it again within milliseconds.
const settleQuiet = 500 * time.Millisecond

// settle waits until the fleet is settled (no member read a record or an
// entry for settleQuiet) and returns when the last read was seen.
func (c *cluster) settle(ctx context.Context) (time.Time, error) {
	began := time.Now()
	last, rows := began, c.storeCounts().Rows
	tick := time.NewTicker(settleQuiet / 10)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("balanced, but the members were still reading the group's log %v later: %w",
				time.Since(began).Round(time.Millisecond), ctx.Err())
		case <-tick.C:
		}
		if n := c.storeCounts().Rows; n != rows {
			rows, last = n, time.Now()
		} else if time.Since(last) >= settleQuiet {
			return last, nil
		}
	}
}

// storeOps is the number of store operations all members made so far:
// reads of the whole group, reads of its log, and writes (renewals
// included).
func (c *cluster) storeOps() int64 {
	o := c.storeCounts()
	return o.Reads + o.Feeds + o.Writes
}

// storeCounts sums the operation counts of every member's store handle.
func (c *cluster) storeCounts() faultstore.Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n faultstore.Counts
	for _, st := range c.counted {
		o := st.Ops()
		n.Reads += o.Reads
		n.Feeds += o.Feeds
		n.Writes += o.Writes
		n.Failed += o.Failed
		n.Rows += o.Rows
	}
	return n
}

// watchServerCPU opens a connection of its own to the store, if the store
// can report its server's CPU time, for measure to read before and after
// each change. It returns the function that closes it (nil if none).
func (c *cluster) watchServerCPU(ctx context.Context) func() {
	read, closeFn := serverCPUReader(ctx, "mem://", c.connect)
	c.serverCPU = read
	return closeFn
}

func (c *cluster) partitionCount() int { return len(c.parts) }
