package sim

import (
	"slices"
	"sync"
	"time"
)

// Recorder is the harness's account of what a fleet does: which member runs
// a handler for which partition, the epochs the store granted, and every
// checkpoint write. It keeps the aggregates the sampler needs (partitions
// without a live handler, partitions with two or more) up to date on every
// event, so a sample costs O(members), and it hands every event to the
// Checker, so invariants are checked at each step and not only at samples.
//
// A handler is live while its member runs and is not paused: a paused
// (SIGSTOPped) process processes nothing until it resumes, and what it does
// after resuming counts again.
//
// Methods are safe for concurrent use (goroutine-based fleets call them
// from handler goroutines).
type Recorder struct {
	mu    sync.Mutex
	clock func() time.Duration
	chk   *Checker

	parts   map[string]*partState
	members map[string]*memberState
	order   []*memberState // every member ever seen, in order of first join

	inSet       int
	unowned     int // in-set partitions with no live handler
	double      int // partitions with two or more live handlers
	doubleArea  float64
	unownedArea float64
	lastT       time.Duration
	starts      int64
	// lastGapEnd is when the last unowned gap of at least GapThreshold
	// ended.
	lastGapEnd time.Duration
	// lastChange is the time of the last handler start or stop.
	lastChange time.Duration
}

// ResumeGrace: a member that resumes after a pause (SIGCONT) runs its
// handlers until it notices that it lost its partitions while stopped; no
// lease can stop a stopped process from doing that, only fencing can keep
// its writes out. Two live handlers for less than ResumeGrace, starting
// within ResumeGrace of the resume of one of them, are reported as
// ResumeOverlap, not as a breach of Exclusive.
const ResumeGrace = time.Second

// GapThreshold: a partition without a live handler for less than this is a
// handoff (stop here, start there), not an outage; shorter gaps count in the
// unowned partition-seconds but not in the time until every partition is
// owned again.
const GapThreshold = time.Second

type partState struct {
	id       string
	inSet    bool
	live     int
	handlers []handlerRef
	grant    uint64 // highest epoch granted
	ckpt     uint64 // last accepted checkpoint value
	hasCkpt  bool
	since    time.Duration // when live became >= 2
	gapSince time.Duration // when it last became unowned (in the set, live == 0)
}

type handlerRef struct {
	m     *memberState
	epoch uint64
}

type memberState struct {
	id      string
	present bool // in the fleet: joined and neither left nor crashed
	dead    bool // crashed: whatever it reports is ignored until it joins again
	paused  bool
	resumed time.Duration // last resume, -1 if never
	parts   []*partState
	pos     map[*partState]int
}

// NewRecorder returns a recorder that reads time from clock and reports to
// chk (which may be nil).
func NewRecorder(clock func() time.Duration, chk *Checker) *Recorder {
	return &Recorder{clock: clock, chk: chk, parts: map[string]*partState{}, members: map[string]*memberState{}}
}

// SetClock replaces the recorder's clock (a goroutine-based fleet whose
// handlers report from inside a Driver.AdvanceTo can give its own).
func (r *Recorder) SetClock(clock func() time.Duration) {
	r.mu.Lock()
	r.clock = clock
	r.mu.Unlock()
}

func (r *Recorder) part(id string) *partState {
	p := r.parts[id]
	if p == nil {
		p = &partState{id: id}
		r.parts[id] = p
	}
	return p
}

func (r *Recorder) member(id string) *memberState {
	m := r.members[id]
	if m == nil {
		m = &memberState{id: id, pos: map[*partState]int{}, resumed: -1}
		r.members[id] = m
		r.order = append(r.order, m)
	}
	return m
}

// advance integrates the double-ownership area up to now.
func (r *Recorder) advance(now time.Duration) {
	if now > r.lastT {
		d := (now - r.lastT).Seconds()
		r.doubleArea += float64(r.double) * d
		r.unownedArea += float64(r.unowned) * d
		r.lastT = now
	}
}

// gapStarted and gapEnded track each partition's unowned periods.
func (r *Recorder) gapStarted(p *partState, now time.Duration) { p.gapSince = now }

func (r *Recorder) gapEnded(p *partState, now time.Duration) {
	if now-p.gapSince >= GapThreshold && now > r.lastGapEnd {
		r.lastGapEnd = now
	}
	if r.chk != nil {
		r.chk.gapEnded(p, p.gapSince, now)
	}
}

// setLive changes p's live count by d and keeps the aggregates.
func (r *Recorder) setLive(p *partState, d int, now time.Duration) {
	before := p.live
	p.live += d
	after := p.live
	if p.inSet {
		if before == 0 && after > 0 {
			r.unowned--
			r.gapEnded(p, now)
		} else if before > 0 && after == 0 {
			r.unowned++
			r.gapStarted(p, now)
		}
	}
	if before < 2 && after >= 2 {
		r.double++
		p.since = now
		if r.chk != nil {
			afterResume := false
			for _, h := range p.handlers {
				if !h.m.paused && h.m.resumed >= 0 && now-h.m.resumed < ResumeGrace {
					afterResume = true
				}
			}
			r.chk.doubleStarted(now, p, r.liveMembers(p), afterResume)
		}
	} else if before >= 2 && after < 2 {
		r.double--
		if r.chk != nil {
			r.chk.doubleEnded(now, p)
		}
	}
}

func (r *Recorder) liveMembers(p *partState) []string {
	var ids []string
	for _, h := range p.handlers {
		if !h.m.paused {
			ids = append(ids, h.m.id)
		}
	}
	return ids
}

// Start records that member began running a handler for partition with
// the given epoch. A second Start for the same pair is ignored.
func (r *Recorder) Start(member, partition string, epoch uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock()
	r.advance(now)
	m := r.member(member)
	if m.dead {
		return
	}
	p := r.part(partition)
	if _, ok := m.pos[p]; ok {
		return
	}
	m.pos[p] = len(m.parts)
	m.parts = append(m.parts, p)
	p.handlers = append(p.handlers, handlerRef{m: m, epoch: epoch})
	if epoch > p.grant {
		p.grant = epoch
	}
	r.starts++
	r.lastChange = now
	if !m.paused {
		r.setLive(p, +1, now)
	}
}

// Stop records that member's handler for partition returned. Unknown pairs
// are ignored.
func (r *Recorder) Stop(member, partition string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock()
	r.advance(now)
	m := r.members[member]
	p := r.parts[partition]
	if m == nil || p == nil {
		return
	}
	r.stopLocked(m, p, now)
}

func (r *Recorder) stopLocked(m *memberState, p *partState, now time.Duration) {
	i, ok := m.pos[p]
	if !ok {
		return
	}
	last := len(m.parts) - 1
	m.parts[i] = m.parts[last]
	m.pos[m.parts[i]] = i
	m.parts = m.parts[:last]
	delete(m.pos, p)
	r.lastChange = now
	for j, h := range p.handlers {
		if h.m == m {
			p.handlers = slices.Delete(p.handlers, j, j+1)
			break
		}
	}
	if !m.paused {
		r.setLive(p, -1, now)
	}
}

// Granted records that the store gave partition a new owner with epoch.
// Fleets that can see the store's decisions call it; it sharpens the
// stale-epoch check (a write with an older epoch after this is stale even
// if the new owner's handler has not started yet).
func (r *Recorder) Granted(partition string, epoch uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.part(partition)
	if epoch > p.grant {
		p.grant = epoch
	}
}

// Checkpoint records a checkpoint write of value by member for partition
// under epoch, and whether the store accepted it. Values are positions in
// the partition's stream: a later accepted write must not be smaller, and
// an accepted write must carry the newest granted epoch.
func (r *Recorder) Checkpoint(member, partition string, epoch, value uint64, accepted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock()
	p := r.part(partition)
	if !accepted {
		if r.chk != nil {
			r.chk.rejected++
		}
		return
	}
	if r.chk != nil {
		r.chk.checkpoint(now, p, member, epoch, value)
	}
	p.ckpt, p.hasCkpt = value, true
}

// LastCheckpoint is the last accepted checkpoint of partition.
func (r *Recorder) LastCheckpoint(partition string) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.parts[partition]
	if p == nil {
		return 0, false
	}
	return p.ckpt, p.hasCkpt
}

// The methods below are called by the runner.

func (r *Recorder) setPartitions(ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock()
	r.advance(now)
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	for id, p := range r.parts {
		if p.inSet && !want[id] {
			p.inSet = false
			r.inSet--
			if p.live == 0 {
				r.unowned--
				r.gapEnded(p, now)
			}
		}
	}
	for _, id := range ids {
		p := r.part(id)
		if !p.inSet {
			p.inSet = true
			r.inSet++
			if p.live == 0 {
				r.unowned++
				r.gapStarted(p, now)
			}
		}
	}
}

func (r *Recorder) joined(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.member(id)
	m.present, m.dead = true, false
	if m.paused {
		r.setPausedLocked(m, false)
	}
}

func (r *Recorder) left(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.member(id).present = false
}

// crashed stops every handler of the member: a killed process runs none.
func (r *Recorder) crashed(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock()
	r.advance(now)
	m := r.member(id)
	if m.paused {
		r.setPausedLocked(m, false)
	}
	for len(m.parts) > 0 {
		r.stopLocked(m, m.parts[len(m.parts)-1], now)
	}
	m.present, m.dead = false, true
}

func (r *Recorder) setPaused(id string, paused bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setPausedLocked(r.member(id), paused)
}

func (r *Recorder) setPausedLocked(m *memberState, paused bool) {
	if m.paused == paused {
		return
	}
	now := r.clock()
	r.advance(now)
	d := -1
	if !paused {
		d = +1
	}
	if !paused {
		m.paused = false
		m.resumed = now
	}
	for _, p := range m.parts {
		r.setLive(p, d, now)
	}
	m.paused = paused
}

// view is one sample of the recorder's state.
type view struct {
	t           time.Duration
	inSet       int
	unowned     int
	double      int
	doubleArea  float64
	starts      int64
	unownedArea float64
	lastGapEnd  time.Duration
	lastChange  time.Duration
	members     []memberView // present members, in join order
}

type memberView struct {
	id      string
	held    int // handlers, live or stalled
	primary int // in-set partitions where this member is the first handler (view(true) only)
	paused  bool
}

func (r *Recorder) view(withPrimary bool) view {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock()
	r.advance(now)
	v := view{t: now, inSet: r.inSet, unowned: r.unowned, double: r.double, doubleArea: r.doubleArea, starts: r.starts,
		unownedArea: r.unownedArea, lastGapEnd: r.lastGapEnd, lastChange: r.lastChange}
	for _, m := range r.order {
		if !m.present {
			continue
		}
		mv := memberView{id: m.id, held: len(m.parts), paused: m.paused}
		if withPrimary {
			for _, p := range m.parts {
				if p.inSet && p.handlers[0].m == m {
					mv.primary++
				}
			}
		}
		v.members = append(v.members, mv)
	}
	return v
}

// heldBy returns, for every member ever seen, how many handlers it runs
// (present members only; -1 for others).
func (r *Recorder) heldBy(ids []string, out []int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, id := range ids {
		m := r.members[id]
		if m == nil || !m.present {
			out[i] = -1
			continue
		}
		out[i] = int32(len(m.parts))
	}
}

// openGaps returns the start of the oldest unowned gap still open (and
// whether there is one), and reports the open gaps to the checker.
func (r *Recorder) openGaps(now time.Duration) (oldest time.Duration, open bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, r.unowned)
	for id, p := range r.parts {
		if p.inSet && p.live == 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := r.parts[id]
		if !open || p.gapSince < oldest {
			oldest, open = p.gapSince, true
		}
		if r.chk != nil {
			r.chk.gapOpen(p, p.gapSince, now)
		}
	}
	return oldest, open
}
