package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
)

// This file is the machinery shared by the policy models: members as
// event-driven processes on the Scheduler (crash, pause, CPU starvation),
// store operations with latency and failures, handlers that process and
// checkpoint, and the partition set. A model (eventhubs.go, kcl.go,
// seed001.go) adds its records and its loops through the modelPolicy hooks.

// modelPolicy is what a model adds to the shared machinery.
type modelPolicy interface {
	// grow makes room for partition indices < n.
	grow(n int)
	// join starts a member's loops.
	join(m *mMember)
	// leave shuts a member down gracefully; the core has already stopped
	// its handlers and marks it dead after leave returns.
	leave(m *mMember)
	// crashed is called after the core killed m.
	crashed(m *mMember)
	// partitionsChanged is called after the partition set changed.
	partitionsChanged(added, removed []int32)
	// accept decides whether the store accepts h's checkpoint.
	accept(m *mMember, h *mHandler) bool
	// stateChanged is called when m's held count, pause or slowness
	// changed (before holds the previous held count).
	stateChanged(m *mMember, before int)
	// preassign makes m the owner of p in the store, as if it had been
	// for a while, and returns the epoch.
	preassign(p int32, m *mMember) uint64
}

type model struct {
	env    *Env
	s      *Scheduler
	rng    *rand.Rand
	faults StoreFaults
	ops    Ops
	pol    modelPolicy
	closed bool

	// partitions, by index
	ids     []string
	index   map[string]int32
	inSet   []bool
	nIn     int
	ckpt    []uint64  // the stored checkpoint of each partition
	holders [][]int32 // members running a handler for each partition

	// members: byID is the current incarnation of each id, all holds
	// every incarnation (its index is mMember.n, the owner id models
	// write in their records: a restarted process is a new owner).
	byID map[string]*mMember
	all  []*mMember
	live []*mMember // alive incarnations, in join order
}

type mMember struct {
	id      string
	n       int32
	alive   bool
	paused  bool
	slow    bool
	offset  time.Duration // wall-clock offset (clock jumps)
	pending []func()      // callbacks that came due while paused

	hs       []*mHandler // running handlers, in start order
	handlers map[int32]*mHandler

	ext any // the model's per-member state
}

type mHandler struct {
	p     int32
	epoch uint64
	pos   uint64 // position processed so far
	i     int    // index in hs
}

func newModel(env *Env, pol modelPolicy) *model {
	md := &model{env: env, s: env.Sched, rng: env.Rand, faults: env.Store, pol: pol,
		index: map[string]int32{}, byID: map[string]*mMember{}}
	md.scheduleCheckpoints()
	return md
}

// after runs fn on member m's behalf d from now, as the member's process
// would: never if it died, when it resumes if it is paused, late if its CPU
// is starved.
func (md *model) after(m *mMember, d time.Duration, fn func()) {
	md.s.After(d, func() { md.fire(m, fn, false) })
}

func (md *model) fire(m *mMember, fn func(), lagged bool) {
	if !m.alive || md.closed {
		return
	}
	if m.paused {
		m.pending = append(m.pending, fn)
		return
	}
	if m.slow && !lagged {
		if lag := md.lag(); lag > 0 {
			md.s.After(lag, func() { md.fire(m, fn, true) })
			return
		}
	}
	fn()
}

// lag is how late a starved member runs a callback: exponentially
// distributed with mean env.SlowLag.
func (md *model) lag() time.Duration {
	return time.Duration(md.rng.ExpFloat64() * float64(md.env.SlowLag))
}

// op counts one store operation and reports whether it succeeded. It also
// adds what the operation would cost one Redis core (faultstore.RedisCost:
// a write, or a read of rows records), without making the model wait for
// it: the models' timings are those of their own documented cycles.
func (md *model) op(write bool, rows int) bool {
	c := faultstore.RedisCost
	if write {
		md.ops.Writes++
		md.ops.ServerBusy += c.Call + c.Write
	} else {
		md.ops.Reads++
		md.ops.Rows += int64(rows)
		md.ops.ServerBusy += c.Call + c.Record*time.Duration(rows)
	}
	if md.faults.Down || (md.faults.FailureRate > 0 && md.rng.Float64() < md.faults.FailureRate) {
		md.ops.Failed++
		return false
	}
	return true
}

// latency is the store's per-operation latency.
func (md *model) latency() time.Duration { return md.faults.Latency }

// wallClock is the member's wall clock (store time plus its offset).
func (md *model) wallClock(m *mMember) time.Duration { return md.s.Now() + m.offset }

func (md *model) start(m *mMember, p int32, epoch uint64) {
	if h, ok := m.handlers[p]; ok {
		h.epoch = epoch
		return
	}
	before := len(m.hs)
	h := &mHandler{p: p, epoch: epoch, pos: md.ckpt[p], i: len(m.hs)}
	m.hs = append(m.hs, h)
	m.handlers[p] = h
	md.holders[p] = append(md.holders[p], m.n)
	md.env.Rec.Start(m.id, md.ids[p], epoch)
	md.pol.stateChanged(m, before)
}

func (md *model) stop(m *mMember, p int32) {
	h, ok := m.handlers[p]
	if !ok {
		return
	}
	before := len(m.hs)
	last := len(m.hs) - 1
	m.hs[h.i] = m.hs[last]
	m.hs[h.i].i = h.i
	m.hs = m.hs[:last]
	delete(m.handlers, p)
	hs := md.holders[p]
	for i, n := range hs {
		if n == m.n {
			hs[i] = hs[len(hs)-1]
			md.holders[p] = hs[:len(hs)-1]
			break
		}
	}
	md.env.Rec.Stop(m.id, md.ids[p])
	md.pol.stateChanged(m, before)
}

func (md *model) stopAll(m *mMember) {
	for len(m.hs) > 0 {
		md.stop(m, m.hs[len(m.hs)-1].p)
	}
}

// scheduleCheckpoints makes every running, unpaused handler advance and
// write a checkpoint every env.CheckpointEvery.
func (md *model) scheduleCheckpoints() {
	every := md.env.CheckpointEvery
	if every <= 0 {
		return
	}
	md.s.After(every, func() {
		if md.closed {
			return
		}
		step := uint64(every / time.Millisecond)
		for _, m := range md.live {
			if m.paused {
				continue
			}
			for _, h := range m.hs {
				h.pos += step
				md.ops.Checkpoints++
				md.ops.ServerBusy += faultstore.RedisCost.Checkpoint
				ok := !md.faults.Down && md.pol.accept(m, h)
				if ok {
					md.ckpt[h.p] = h.pos
				}
				md.env.Rec.Checkpoint(m.id, md.ids[h.p], h.epoch, h.pos, ok)
			}
		}
		md.scheduleCheckpoints()
	})
}

// Fleet methods.

// Preassign implements Preassigner: the models start from a steady state.
func (md *model) Preassign(owner map[string]string) error {
	for p, id := range md.ids {
		mid, ok := owner[id]
		if !ok || !md.inSet[p] {
			continue
		}
		m, err := md.member(mid)
		if err != nil {
			return err
		}
		epoch := md.pol.preassign(int32(p), m)
		md.start(m, int32(p), epoch)
	}
	return nil
}

func (md *model) SetPartitions(ps []store.Partition) error {
	want := make(map[string]bool, len(ps))
	var added, removed []int32
	for _, p := range ps {
		want[p.ID] = true
		i, ok := md.index[p.ID]
		if !ok {
			i = int32(len(md.ids))
			md.index[p.ID] = i
			md.ids = append(md.ids, p.ID)
			md.inSet = append(md.inSet, false)
			md.ckpt = append(md.ckpt, 0)
			md.holders = append(md.holders, nil)
		}
		if !md.inSet[i] {
			md.inSet[i] = true
			md.nIn++
			added = append(added, i)
		}
	}
	md.pol.grow(len(md.ids))
	for i, id := range md.ids {
		if md.inSet[i] && !want[id] {
			md.inSet[i] = false
			md.nIn--
			removed = append(removed, int32(i))
		}
	}
	md.pol.partitionsChanged(added, removed)
	return nil
}

func (md *model) AddMember(id string) error {
	if m := md.byID[id]; m != nil && m.alive {
		return fmt.Errorf("member %s is already running", id)
	}
	m := &mMember{id: id, n: int32(len(md.all)), alive: true, handlers: map[int32]*mHandler{}}
	md.all = append(md.all, m)
	md.byID[id] = m
	md.live = append(md.live, m)
	md.pol.join(m)
	md.pol.stateChanged(m, 0)
	return nil
}

func (md *model) member(id string) (*mMember, error) {
	m := md.byID[id]
	if m == nil || !m.alive {
		return nil, fmt.Errorf("no running member %s", id)
	}
	return m, nil
}

func (md *model) kill(m *mMember) {
	before := len(m.hs)
	m.alive = false
	m.pending = nil
	for i, x := range md.live {
		if x == m {
			md.live = append(md.live[:i], md.live[i+1:]...)
			break
		}
	}
	md.pol.stateChanged(m, before)
}

func (md *model) Leave(id string) error {
	m, err := md.member(id)
	if err != nil {
		return err
	}
	md.stopAll(m)
	md.pol.leave(m)
	md.kill(m)
	return nil
}

func (md *model) Crash(id string) error {
	m, err := md.member(id)
	if err != nil {
		return err
	}
	md.stopAll(m)
	md.kill(m)
	md.pol.crashed(m)
	return nil
}

func (md *model) Pause(id string) error {
	m, err := md.member(id)
	if err != nil {
		return err
	}
	before := len(m.hs)
	m.paused = true
	md.pol.stateChanged(m, before)
	return nil
}

func (md *model) Resume(id string) error {
	m, err := md.member(id)
	if err != nil {
		return err
	}
	before := len(m.hs)
	m.paused = false
	pending := m.pending
	m.pending = nil
	for _, fn := range pending {
		md.s.After(0, func() { md.fire(m, fn, false) })
	}
	md.pol.stateChanged(m, before)
	return nil
}

func (md *model) SetSlow(id string, slow bool) error {
	m, err := md.member(id)
	if err != nil {
		return err
	}
	before := len(m.hs)
	m.slow = slow
	md.pol.stateChanged(m, before)
	return nil
}

func (md *model) JumpClock(id string, d time.Duration) error {
	m, err := md.member(id)
	if err != nil {
		return err
	}
	m.offset += d
	return nil
}

func (md *model) SetStore(f StoreFaults) error {
	md.faults = f
	return nil
}

func (md *model) Ops() Ops { return md.ops }

func (md *model) Close() error {
	md.closed = true
	return nil
}

// Sets of indices with O(1) add, remove and random choice.

// denseSet holds indices < n in a slice (one int32 of position per index).
type denseSet struct {
	items []int32
	pos   []int32 // -1 when absent
}

func (s *denseSet) grow(n int) {
	for len(s.pos) < n {
		s.pos = append(s.pos, -1)
	}
}

func (s *denseSet) has(x int32) bool { return int(x) < len(s.pos) && s.pos[x] >= 0 }

func (s *denseSet) add(x int32) {
	if s.has(x) {
		return
	}
	s.grow(int(x) + 1)
	s.pos[x] = int32(len(s.items))
	s.items = append(s.items, x)
}

func (s *denseSet) remove(x int32) {
	if !s.has(x) {
		return
	}
	i := s.pos[x]
	last := s.items[len(s.items)-1]
	s.items[i] = last
	s.pos[last] = i
	s.items = s.items[:len(s.items)-1]
	s.pos[x] = -1
}

func (s *denseSet) len() int { return len(s.items) }

// sparseSet holds any indices, positions in a map.
type sparseSet struct {
	items []int32
	pos   map[int32]int32
}

func (s *sparseSet) has(x int32) bool { _, ok := s.pos[x]; return ok }

func (s *sparseSet) add(x int32) {
	if s.pos == nil {
		s.pos = map[int32]int32{}
	}
	if _, ok := s.pos[x]; ok {
		return
	}
	s.pos[x] = int32(len(s.items))
	s.items = append(s.items, x)
}

func (s *sparseSet) remove(x int32) {
	i, ok := s.pos[x]
	if !ok {
		return
	}
	last := s.items[len(s.items)-1]
	s.items[i] = last
	s.pos[last] = i
	s.items = s.items[:len(s.items)-1]
	delete(s.pos, x)
}

func (s *sparseSet) len() int { return len(s.items) }

// pickDistinct returns k distinct random elements of items (all of them,
// shuffled, if k >= len(items)).
func pickDistinct(rng *rand.Rand, items []int32, k int) []int32 {
	n := len(items)
	if k <= 0 || n == 0 {
		return nil
	}
	if k >= n {
		out := append([]int32(nil), items...)
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out
	}
	if k*4 > n {
		idx := rng.Perm(n)[:k]
		out := make([]int32, k)
		for i, j := range idx {
			out[i] = items[j]
		}
		return out
	}
	seen := make(map[int]bool, k)
	out := make([]int32, 0, k)
	for len(out) < k {
		j := rng.IntN(n)
		if !seen[j] {
			seen[j] = true
			out = append(out, items[j])
		}
	}
	return out
}
