package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"sort"
	"syscall"
	"time"
)

// DefaultStoreLatency is the per-operation latency of the store in every
// scenario unless a step changes it (a store on the same network).
const DefaultStoreLatency = 2 * time.Millisecond

// RunOptions tune one run. The zero value means the defaults.
type RunOptions struct {
	// Seed makes the run reproducible (default 1).
	Seed uint64
	// Sample is the sampling period of the timeline (default 100 ms).
	Sample time.Duration
	// Settle is how long the fleet must stay balanced before the warm-up
	// ends (default 30 s); store operations in that window are the
	// steady-state cost.
	Settle time.Duration
	// MaxWarmup ends the warm-up even if the fleet never balanced
	// (default 30 min).
	MaxWarmup time.Duration
	// Store is the store's behaviour at the start (default: latency
	// DefaultStoreLatency, no failures).
	Store *StoreFaults
	// SlowLag is the mean lag of a CPU-starved member's callbacks
	// (default 2 s).
	SlowLag time.Duration
	// CheckpointEvery is how often handlers checkpoint (default 10 s).
	CheckpointEvery time.Duration
	// SeriesMembers: per-member series are kept when the scenario has at
	// most this many members (default 40); otherwise min/mean/max only.
	SeriesMembers int
	// ColdStart makes fleets that could start from a balanced assignment
	// (Preassigner) warm up by joining instead.
	ColdStart bool
	// MeasureCost records the process's CPU time and the fleet's heap. It
	// is meaningful only when nothing else runs in the process.
	MeasureCost bool
}

func (o RunOptions) withDefaults() RunOptions {
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Sample == 0 {
		o.Sample = 100 * time.Millisecond
	}
	if o.Settle == 0 {
		o.Settle = 30 * time.Second
	}
	if o.MaxWarmup == 0 {
		o.MaxWarmup = 30 * time.Minute
	}
	if o.Store == nil {
		o.Store = &StoreFaults{Latency: DefaultStoreLatency}
	}
	if o.SlowLag == 0 {
		o.SlowLag = 2 * time.Second
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = 10 * time.Second
	}
	if o.SeriesMembers == 0 {
		o.SeriesMembers = 40
	}
	return o
}

// Result is the outcome of one scenario run with one policy.
type Result struct {
	Policy     string `json:"policy"`
	Scenario   string `json:"scenario"`
	About      string `json:"about"`
	Partitions int    `json:"partitions"`
	Members    int    `json:"members"`
	Seed       uint64 `json:"seed"`

	// WarmupEnd is the virtual time at which the steps started (t0).
	WarmupEnd      time.Duration `json:"warmup_end_ns"`
	WarmupBalanced bool          `json:"warmup_balanced"`
	// MeasureAt is the time of the step recovery is measured from.
	MeasureAt time.Duration `json:"measure_at_ns"`
	End       time.Duration `json:"end_ns"`

	Metrics    Metrics           `json:"metrics"`
	Violations map[Invariant]int `json:"violations"`
	// WarmupViolations are the breaches during the warm-up (all members
	// starting at once), not counted in Violations.
	WarmupViolations map[Invariant]int `json:"warmup_violations"`
	Details          []Violation       `json:"violation_details,omitempty"`
	// Rejected counts checkpoint writes the store refused (fencing).
	Rejected int64 `json:"rejected_checkpoints"`

	Cost Cost `json:"cost"`

	Timeline *Timeline `json:"-"`
	Err      string    `json:"error,omitempty"`
}

// Cost is what the run cost the process running it.
type Cost struct {
	Wall   time.Duration `json:"wall_ns"`
	Events uint64        `json:"events"`
	// CPU is the process CPU time of the whole run (MeasureCost only).
	CPU time.Duration `json:"cpu_ns,omitempty"`
	// CPUPerMemberMinute: CPU per member per minute of virtual time after
	// the warm-up.
	CPUPerMemberMinute time.Duration `json:"cpu_per_member_minute_ns,omitempty"`
	// CPURebalance is the CPU spent from the measured step until the
	// fleet was balanced again.
	CPURebalance time.Duration `json:"cpu_rebalance_ns,omitempty"`
	// HeapPerMember is the live heap of the fleet at the end divided by
	// the number of members.
	HeapPerMember int64 `json:"heap_per_member_bytes,omitempty"`
	// PeakHeapPerMember is the most heap in use (live and not yet
	// collected) at any sample after the warm-up, divided by the number of
	// members.
	PeakHeapPerMember int64 `json:"peak_heap_per_member_bytes,omitempty"`
	// Per member, from the measured step until the fleet was balanced
	// again: CPU time, bytes allocated and store reads (snapshots, lists).
	CPURebalancePerMember   time.Duration `json:"cpu_rebalance_per_member_ns,omitempty"`
	AllocRebalancePerMember int64         `json:"alloc_rebalance_per_member_bytes,omitempty"`
	ReadsRebalancePerMember float64       `json:"reads_rebalance_per_member,omitempty"`
}

// Timeline is the sampled state of a run.
type Timeline struct {
	Step    time.Duration `json:"step_ns"`
	Unowned []int32       `json:"unowned"`
	Double  []int32       `json:"double"`
	// Balanced: every partition has exactly one live handler and every
	// member holds floor(P/N) or ceil(P/N).
	Balanced []bool    `json:"balanced"`
	MinHeld  []int32   `json:"min_held"`
	MaxHeld  []int32   `json:"max_held"`
	MeanHeld []float32 `json:"mean_held"`
	// Members and Held: per-member handler counts (-1 when the member is
	// not running), kept for small fleets.
	Members []string  `json:"members,omitempty"`
	Held    [][]int32 `json:"held,omitempty"`
	// CPU is the process CPU time at each sample, Alloc the bytes
	// allocated so far, Heap the heap in use and Reads the fleet's store
	// reads so far (MeasureCost only).
	CPU   []time.Duration `json:"-"`
	Alloc []uint64        `json:"-"`
	Heap  []uint64        `json:"-"`
	Reads []int64         `json:"-"`
}

// Len is the number of samples.
func (tl *Timeline) Len() int { return len(tl.Unowned) }

// At is the time of sample i.
func (tl *Timeline) At(i int) time.Duration { return time.Duration(i+1) * tl.Step }

// Run runs one scenario with one policy.
func Run(ctx context.Context, pol Policy, sc Scenario, o RunOptions) (*Result, error) {
	o = o.withDefaults()
	began := realNow()
	var cpu0 time.Duration
	var heap0 uint64
	if o.MeasureCost {
		heap0 = liveHeap()
		cpu0 = processCPU()
	}

	sched := NewScheduler()
	chk := NewChecker(pol.FailoverBound())
	chk.measureFrom(math.MaxInt64) // the warm-up: counted apart until t0
	rec := NewRecorder(sched.Now, chk)
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%s", pol.Name(), sc.Name)
	env := &Env{
		Sched: sched, Rand: rand.New(rand.NewPCG(o.Seed, h.Sum64())), Rec: rec, Group: "sim",
		Members: sc.Members, Partitions: sc.Partitions,
		Store: *o.Store, SlowLag: o.SlowLag, CheckpointEvery: o.CheckpointEvery,
	}
	fleet, err := pol.NewFleet(env)
	if err != nil {
		return nil, fmt.Errorf("sim: %s: new fleet: %w", pol.Name(), err)
	}
	r := &runner{sc: sc, o: o, env: env, rec: rec, chk: chk, fleet: fleet, tl: &Timeline{Step: o.Sample}}
	defer func() {
		if fleet != nil {
			fleet.Close()
		}
	}()
	res := &Result{Policy: pol.Name(), Scenario: sc.Name, About: sc.About, Partitions: sc.Partitions, Members: sc.Members, Seed: o.Seed}

	// Which members get a series of their own.
	ids := memberRange(0, sc.Members)
	for _, st := range sc.Steps {
		for _, id := range st.Members {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) <= o.SeriesMembers {
		r.tl.Members = ids
		r.tl.Held = make([][]int32, len(ids))
		r.heldBuf = make([]int32, len(ids))
	}

	if err := r.apply(Step{Do: Partitions, Partitions: sc.Partitions}); err != nil {
		return nil, err
	}
	if err := r.apply(Step{Do: Add, Members: memberRange(0, sc.Members)}); err != nil {
		return nil, err
	}
	if pa, ok := fleet.(Preassigner); ok && !o.ColdStart && sc.Members > 0 {
		owner := make(map[string]string, sc.Partitions)
		for i, p := range PartitionSet(sc.Partitions) {
			owner[p.ID] = MemberID(i % sc.Members)
		}
		if err := pa.Preassign(owner); err != nil {
			return nil, fmt.Errorf("sim: %s: preassign: %w", pol.Name(), err)
		}
	}

	// Warm-up: run until balanced and quiet for Settle.
	quietSince := time.Duration(-1)
	var quietOps Ops
	t := time.Duration(0)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t += o.Sample
		sched.RunUntil(t)
		if r.sample() {
			if quietSince < 0 {
				quietSince, quietOps = t, fleet.Ops()
			}
			if t-quietSince >= o.Settle {
				res.WarmupBalanced = true
				break
			}
		} else {
			quietSince = -1
		}
		if t >= o.MaxWarmup {
			break
		}
	}
	t0 := t
	res.WarmupEnd = t0
	ops0 := fleet.Ops()
	if quietSince >= 0 && t0 > quietSince {
		res.Metrics.Steady = rates(ops0.sub(quietOps), t0-quietSince, len(r.present))
	}
	v0 := rec.view(false)
	starts0, area0, unowned0 := v0.starts, v0.doubleArea, v0.unownedArea
	sample0 := r.tl.Len()
	r.started = true
	r.ideal = map[string]int{}
	for _, mv := range rec.view(true).members {
		r.ideal[mv.id] = mv.primary
	}
	chk.measureFrom(t0)

	// The steps, interleaved with the samples.
	steps := slices.Clone(sc.Steps)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].At < steps[j].At })
	measureAt := t0
	lastFault := t0
	if len(sc.Steps) > 0 {
		measureAt = t0 + sc.Steps[sc.measureStep()].At
		lastFault = t0 + steps[len(steps)-1].At
	}
	chk.recoverAfter(lastFault)
	end := t0 + sc.Duration
	next := t0 + o.Sample
	for k := 0; ; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if k < len(steps) && t0+steps[k].At <= next && t0+steps[k].At <= end {
			sched.RunUntil(t0 + steps[k].At)
			if err := r.apply(steps[k]); err != nil {
				return nil, err
			}
			k++
			continue
		}
		if next > end {
			break
		}
		sched.RunUntil(next)
		r.sample()
		next += o.Sample
	}

	// Metrics.
	final := rec.view(false)
	res.MeasureAt, res.End = measureAt, end
	m := &res.Metrics
	m.Moves = final.starts - starts0
	m.MinMoves = r.minMoves
	m.DoubleSeconds = final.doubleArea - area0
	m.Ops = fleet.Ops().sub(ops0)
	m.Rates = rates(m.Ops, end-t0, len(r.present))
	m.UnownedSeconds = final.unownedArea - unowned0
	tl := r.tl
	lastUnbalanced := time.Duration(-1)
	for i := sample0; i < tl.Len(); i++ {
		if at := tl.At(i); at >= measureAt && !tl.Balanced[i] {
			lastUnbalanced = at
		}
		if d := int(tl.MaxHeld[i] - tl.MinHeld[i]); d > m.PeakImbalance {
			m.PeakImbalance = d
		}
	}
	// Balanced at the end, the fleet is balanced since the later of its
	// last unbalanced sample and the last handler start or stop (samples
	// can miss a quick change; the last change cannot be missed).
	n := tl.Len()
	settled := max(final.lastChange, lastUnbalanced+o.Sample)
	switch {
	case n == 0 || !tl.Balanced[n-1]:
		m.TimeToBalance = -1
	case settled > measureAt:
		m.TimeToBalance = settled - measureAt
	}
	oldest, open := rec.openGaps(end)
	switch {
	case open && end-oldest >= GapThreshold:
		m.TimeToOwned = -1
	case final.lastGapEnd > measureAt:
		m.TimeToOwned = final.lastGapEnd - measureAt
	}
	chk.closeOpen(end)
	chk.checkSpread(final)
	res.Violations = chk.Counts()
	res.WarmupViolations = chk.Before()
	res.Details = chk.Details()
	res.Rejected = chk.Rejected()
	res.Timeline = tl

	res.Cost.Wall = realNow() - began
	res.Cost.Events = sched.Events()
	if o.MeasureCost {
		res.Cost.CPU = processCPU() - cpu0
		if len(r.present) > 0 {
			res.Cost.HeapPerMember = int64(liveHeap()-min(heap0, liveHeap())) / int64(len(r.present))
			minutes := (end - t0).Minutes()
			if i0, i1 := sample0, tl.Len()-1; i1 > i0 && minutes > 0 {
				res.Cost.CPUPerMemberMinute = time.Duration(float64(tl.CPU[i1]-tl.CPU[i0]) / float64(len(r.present)) / minutes)
			}
		}
		members := int64(max(1, len(r.present)))
		for i := sample0; i < len(tl.Heap); i++ {
			res.Cost.PeakHeapPerMember = max(res.Cost.PeakHeapPerMember, int64(tl.Heap[i])/members)
		}
		if m.TimeToBalance >= 0 {
			ia := int(measureAt/o.Sample) - 1
			ib := int((measureAt+m.TimeToBalance)/o.Sample) - 1
			if ia >= 0 && ib < len(tl.CPU) && ib >= ia {
				c := &res.Cost
				c.CPURebalance = tl.CPU[ib] - tl.CPU[ia]
				c.CPURebalancePerMember = c.CPURebalance / time.Duration(members)
				c.AllocRebalancePerMember = int64(tl.Alloc[ib]-tl.Alloc[ia]) / members
				c.ReadsRebalancePerMember = float64(tl.Reads[ib]-tl.Reads[ia]) / float64(members)
			}
		}
	}
	err = fleet.Close()
	fleet = nil
	if err != nil {
		return res, fmt.Errorf("sim: %s: close: %w", pol.Name(), err)
	}
	return res, nil
}

type runner struct {
	sc      Scenario
	o       RunOptions
	env     *Env
	rec     *Recorder
	chk     *Checker
	fleet   Fleet
	tl      *Timeline
	heldBuf []int32

	present    []string // members in the fleet, in join order
	paused     map[string]bool
	minMoves   int64
	started    bool           // past the warm-up: count minimum moves
	ideal      map[string]int // partitions per member of an ideal policy
	partitions int            // the current partition count
}

// apply runs one step on the fleet and keeps the books.
func (r *runner) apply(st Step) error {
	if r.paused == nil {
		r.paused = map[string]bool{}
	}
	f := r.fleet
	var err error
	each := func(fn func(id string) error) {
		for _, id := range st.Members {
			if e := fn(id); e != nil && err == nil {
				err = fmt.Errorf("sim: step %s: %s: %w", st, id, e)
			}
		}
	}
	switch st.Do {
	case Add:
		each(func(id string) error {
			r.rec.joined(id)
			r.present = append(r.present, id)
			return f.AddMember(id)
		})
	case Leave:
		each(func(id string) error {
			r.rec.left(id)
			r.present = slices.DeleteFunc(r.present, func(s string) bool { return s == id })
			return f.Leave(id)
		})
	case Crash:
		each(func(id string) error {
			e := f.Crash(id)
			r.rec.crashed(id)
			r.present = slices.DeleteFunc(r.present, func(s string) bool { return s == id })
			delete(r.paused, id)
			return e
		})
	case Pause:
		each(func(id string) error {
			r.rec.setPaused(id, true)
			r.paused[id] = true
			return f.Pause(id)
		})
	case Resume:
		each(func(id string) error {
			r.rec.setPaused(id, false)
			delete(r.paused, id)
			return f.Resume(id)
		})
	case Slow, Unslow:
		each(func(id string) error { return f.SetSlow(id, st.Do == Slow) })
	case ClockJump:
		each(func(id string) error { return f.JumpClock(id, st.Jump) })
	case SetStore:
		err = f.SetStore(st.Store)
	case Partitions:
		ps := PartitionSet(st.Partitions)
		ids := make([]string, len(ps))
		for i, p := range ps {
			ids[i] = p.ID
		}
		r.rec.setPartitions(ids)
		r.partitions = st.Partitions
		err = f.SetPartitions(ps)
	default:
		err = fmt.Errorf("sim: unknown action %v", st.Do)
	}
	if err != nil {
		return err
	}
	if r.started && st.Do.changesMembership() {
		r.minMoves += r.idealStep(st)
	}
	return nil
}

// idealStep follows an ideal policy through a step: one that is always
// balanced and moves as few partitions as possible. It returns the
// partitions that policy moves. The minimum of a scenario is the sum over
// its steps, whatever the policy under test did in between.
func (r *runner) idealStep(st Step) int64 {
	switch st.Do {
	case Add:
		for _, id := range st.Members {
			r.ideal[id] = 0
		}
	case Leave, Crash:
		for _, id := range st.Members {
			delete(r.ideal, id)
		}
	case Partitions:
		// Which partitions went or came depends on the set: start from
		// the actual holdings, restricted to the new set.
		r.ideal = map[string]int{}
		for _, mv := range r.rec.view(true).members {
			r.ideal[mv.id] = mv.primary
		}
	}
	ids := make([]string, 0, len(r.ideal))
	for id := range r.ideal {
		ids = append(ids, id)
	}
	have := make([]int, len(ids))
	sort.Strings(ids)
	for i, id := range ids {
		have[i] = r.ideal[id]
	}
	moves, after := minMoves(have, r.partitions)
	for i, id := range ids {
		r.ideal[id] = after[i]
	}
	return moves
}

// minMoves is the fewest partition moves that take holdings have (per
// member) to a balanced assignment of total partitions: keep as many in
// place as the fair shares allow, the largest holders getting the ceil
// shares. It returns the moves and the holdings after.
func minMoves(have []int, total int) (int64, []int) {
	n := len(have)
	if n == 0 {
		return 0, nil
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return have[order[a]] > have[order[b]] })
	q, extra := total/n, total%n
	after := make([]int, n)
	kept := 0
	for rank, i := range order {
		t := q
		if rank < extra {
			t++
		}
		kept += min(have[i], t)
		after[i] = t
	}
	return int64(total - kept), after
}

// sample appends one sample to the timeline and reports whether the fleet
// is balanced.
func (r *runner) sample() bool {
	v := r.rec.view(false)
	tl := r.tl
	n := len(v.members)
	lo, hi := 0, 0
	if n > 0 {
		lo, hi = v.inSet/n, (v.inSet+n-1)/n
	}
	balanced := v.unowned == 0 && v.double == 0 && n > 0
	minH, maxH, sum, live := int32(-1), int32(0), 0, 0
	for _, m := range v.members {
		if m.held < lo || m.held > hi {
			balanced = false
		}
		if m.paused {
			continue
		}
		h := int32(m.held)
		if minH < 0 || h < minH {
			minH = h
		}
		maxH = max(maxH, h)
		sum += m.held
		live++
	}
	if minH < 0 {
		minH = 0
	}
	tl.Unowned = append(tl.Unowned, int32(v.unowned))
	tl.Double = append(tl.Double, int32(v.double))
	tl.Balanced = append(tl.Balanced, balanced)
	tl.MinHeld = append(tl.MinHeld, minH)
	tl.MaxHeld = append(tl.MaxHeld, maxH)
	mean := float32(0)
	if live > 0 {
		mean = float32(sum) / float32(live)
	}
	tl.MeanHeld = append(tl.MeanHeld, mean)
	if tl.Members != nil {
		r.rec.heldBy(tl.Members, r.heldBuf)
		for i, h := range r.heldBuf {
			tl.Held[i] = append(tl.Held[i], h)
		}
	}
	if r.o.MeasureCost {
		tl.CPU = append(tl.CPU, processCPU())
		alloc, heap := memSample()
		tl.Alloc = append(tl.Alloc, alloc)
		tl.Heap = append(tl.Heap, heap)
		tl.Reads = append(tl.Reads, r.fleet.Ops().Reads)
	}
	return balanced
}

// realNow is the real time (since the epoch), also inside a synctest bubble
// where package time's clock is virtual.
func realNow() time.Duration {
	var tv syscall.Timeval
	if err := syscall.Gettimeofday(&tv); err != nil {
		return 0
	}
	return time.Duration(tv.Nano())
}

// processCPU is the CPU time (user + system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// memSample returns the bytes allocated so far and the heap in use (live
// objects and those not yet collected), without stopping the world.
func memSample() (alloc, heap uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
