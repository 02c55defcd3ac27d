package main

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/tracker"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
)

// cluster runs members of one group inside this process and measures them
// through their handlers.
type cluster struct {
	ctx     context.Context
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
}

type running struct {
	m      *herd.Member
	st     store.Store
	cancel context.CancelFunc
}

// step is the outcome of one change to the fleet.
type step struct {
	Elapsed       time.Duration
	Moves         int
	MinMoves      int
	MaxConcurrent int
}

func newCluster(ctx context.Context, group string, partitions int, cfg herd.Config, connect func(context.Context) (store.Store, error)) *cluster {
	c := &cluster{ctx: ctx, group: group, cfg: cfg, connect: connect, tr: tracker.New(), members: map[string]*running{}}
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
	return st.SetPartitions(ctx, c.group, herd.Numbered(len(c.parts)))
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

// leave makes a member leave gracefully.
func (c *cluster) leave(ctx context.Context, id string) error {
	r := c.remove(id)
	if r == nil {
		return fmt.Errorf("no member %s", id)
	}
	defer r.st.Close()
	defer r.cancel()
	return r.m.Leave(ctx)
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

// stopAll makes every member leave (bounded by ctx), then crashes stragglers.
func (c *cluster) stopAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, id := range c.live() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.leave(ctx, id); err != nil {
				slog.Warn("leave failed", "member", id, "err", err)
			}
		}()
	}
	wg.Wait()
}

// measure applies change to the fleet and waits until it is balanced again.
// The minimum number of moves is the partitions of members that are gone
// plus what balance.MinMoves says for the rest.
func (c *cluster) measure(ctx context.Context, timeout time.Duration, change func() error) (step, error) {
	before := c.tr.Owners()
	c.tr.Reset()
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
	s := step{Elapsed: time.Since(start), Moves: c.tr.Moves(), MaxConcurrent: c.tr.MaxConcurrent()}
	s.MinMoves = tracker.MinMoves(c.parts, before, after)
	return s, nil
}

// storeOps is the number of store operations all members made so far.
func (c *cluster) storeOps() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, st := range c.counted {
		o := st.Ops()
		n += o.Reads + o.Writes
	}
	return n
}
