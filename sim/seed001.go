package sim

import "time"

// Seed001 models the Redis algorithm of seeds/001 (lease-allocation and
// lease-grab hashes, grab and allocated pub/sub channels):
//
//   - Per partition, once per normal lease time (60 s) a node that does not
//     own it and sees no value in the grab hash for it (one HGET) publishes
//     a grab notification (one PUBLISH); every node resets its timer for
//     that partition on receipt, so there is about one grab per partition
//     per minute. If the grab hash has held a value for longer than the
//     maximum lease time, the publisher first clears both hashes.
//   - On receipt every node waits (held - 0.5) x delay if it is processing
//     the partition, (held + 0.5) x delay otherwise (held = partitions it
//     processes, delay = the leases-held delay, 100-500 ms in the seed;
//     250 ms here), then races to HSETNX the grab hash. Every node writes.
//   - The winner, if it is not already the processor, reads the allocation
//     hash; if another node is processing, it waits for that node's
//     "allocated" notification, or for the maximum shutdown time, then
//     writes itself into the allocation hash and starts. After the minimum
//     lease grab time it deletes its grab hash value.
//   - A processing node that loses the race stops, deletes the allocation
//     field (HDEL, whoever is in it) and publishes "allocated".
//   - Nothing else: no session, no expiry of the allocation, no release on
//     shutdown other than the stop-HDEL-publish above, no fencing of
//     checkpoints. A node whose CPU is starved answers the race late and
//     loses the partitions it processes, as the seed's author observed.
//
// The seed gives no values for the maximum lease time, the minimum lease
// grab time and the maximum shutdown time; the defaults here (180 s, 30 s,
// 30 s) respect its constraints (longer than, shorter than the normal lease
// time).
type Seed001 struct {
	NormalLease time.Duration // 60 s
	MaxLease    time.Duration // 180 s
	MinGrab     time.Duration // 30 s
	MaxShutdown time.Duration // 30 s
	HeldDelay   time.Duration // 250 ms
}

func (r Seed001) withDefaults() Seed001 {
	if r.NormalLease == 0 {
		r.NormalLease = 60 * time.Second
	}
	if r.MaxLease == 0 {
		r.MaxLease = 180 * time.Second
	}
	if r.MinGrab == 0 {
		r.MinGrab = 30 * time.Second
	}
	if r.MaxShutdown == 0 {
		r.MaxShutdown = 30 * time.Second
	}
	if r.HeldDelay == 0 {
		r.HeldDelay = 250 * time.Millisecond
	}
	return r
}

func (r Seed001) Name() string { return "seed001-redis" }

func (r Seed001) Describe() string {
	r = r.withDefaults()
	return "seed 001 Redis algorithm model: a grab race per partition every " + fmtDur(r.NormalLease) +
		", delay (held±0.5) x " + fmtDur(r.HeldDelay) + ", max shutdown " + fmtDur(r.MaxShutdown) +
		", min grab " + fmtDur(r.MinGrab) + ", max lease " + fmtDur(r.MaxLease) + ", unfenced checkpoints"
}

// FailoverBound: the next grab of the partition (within the normal lease
// time), the race, then the maximum shutdown time waiting for the dead
// processor.
func (r Seed001) FailoverBound() time.Duration {
	r = r.withDefaults()
	return r.NormalLease + r.MaxShutdown + 10*time.Second
}

func (r Seed001) NewFleet(env *Env) (Fleet, error) {
	m := &seedModel{cfg: r.withDefaults()}
	m.model = newModel(env, m)
	return m, nil
}

type seedPart struct {
	alloc      int32 // lease allocation hash: the processing node, -1 none
	grab       int32 // lease grab hash: the race winner, -1 none
	grabAt     time.Duration
	lastSignal time.Duration
	timer      *Timer
	waiting    int32 // node waiting for "allocated", -1 none
	waitTimer  *Timer
	epoch      uint64
}

type seedModel struct {
	*model
	cfg Seed001

	parts []seedPart
	// buckets[h]: "plain" nodes (running, not paused, not starved) that
	// process h partitions; the fastest racers are in the lowest bucket.
	buckets []*sparseSet
	bucket  map[int32]int // node -> its bucket, for plain nodes
	// slowOrPaused: running nodes that are paused or starved.
	slowOrPaused sparseSet
}

func (s *seedModel) grow(n int) {
	for len(s.parts) < n {
		s.parts = append(s.parts, seedPart{alloc: -1, grab: -1, waiting: -1})
	}
}

func (s *seedModel) plain(m *mMember) bool { return m.alive && !m.paused && !m.slow }

// stateChanged keeps the buckets.
func (s *seedModel) stateChanged(m *mMember, before int) {
	if s.bucket == nil {
		s.bucket = map[int32]int{}
	}
	if b, ok := s.bucket[m.n]; ok {
		s.buckets[b].remove(m.n)
		delete(s.bucket, m.n)
	}
	s.slowOrPaused.remove(m.n)
	if !s.plain(m) {
		if m.alive {
			s.slowOrPaused.add(m.n)
		}
		return
	}
	h := len(m.hs)
	for len(s.buckets) <= h {
		s.buckets = append(s.buckets, &sparseSet{})
	}
	s.buckets[h].add(m.n)
	s.bucket[m.n] = h
}

func (s *seedModel) join(m *mMember) {
	// A node's timers start with the partitions' shared phase; arm the
	// partitions that have no grab scheduled yet.
	for p := range s.parts {
		if s.inSet[p] && s.parts[p].timer == nil {
			s.arm(int32(p), time.Duration(s.rng.Int64N(int64(s.cfg.NormalLease))))
		}
	}
}

func (s *seedModel) arm(p int32, d time.Duration) {
	sp := &s.parts[p]
	sp.timer.Stop()
	sp.timer = s.s.After(d, func() { s.fire(p) })
}

// fire: a node's grab timer for p went off.
func (s *seedModel) fire(p int32) {
	sp := &s.parts[p]
	sp.timer = nil
	if s.closed || !s.inSet[p] {
		return
	}
	// The publisher: a running node that does not process p (whichever
	// node's timer fires first; any such node will do).
	if !s.publisher(p) {
		s.arm(p, s.cfg.NormalLease)
		return
	}
	now := s.s.Now()
	if !s.op(false, 1) { // HGET grab
		s.arm(p, s.cfg.NormalLease)
		return
	}
	if sp.grab >= 0 {
		if now-sp.lastSignal <= s.cfg.MaxLease {
			s.arm(p, s.cfg.NormalLease)
			return
		}
		// A winner died between its HSETNX and its HDEL: clear both.
		if s.op(true, 0) {
			sp.alloc = -1
		}
		if s.op(true, 0) {
			sp.grab = -1
		}
	}
	if !s.op(true, 0) { // PUBLISH grab
		s.arm(p, s.cfg.NormalLease)
		return
	}
	sp.lastSignal = now
	lat := s.latency()
	s.arm(p, lat+s.cfg.NormalLease)
	s.s.After(lat, func() { s.race(p) })
}

// publisher reports whether some running, unpaused node does not process p.
func (s *seedModel) publisher(p int32) bool {
	eligible := func(m *mMember) bool {
		if m.paused {
			return false
		}
		_, owns := m.handlers[p]
		return !owns
	}
	for range 8 {
		if len(s.live) == 0 {
			return false
		}
		if eligible(s.live[s.rng.IntN(len(s.live))]) {
			return true
		}
	}
	for _, m := range s.live {
		if eligible(m) {
			return true
		}
	}
	return false
}

// race: the grab notification for p reaches every node.
func (s *seedModel) race(p int32) {
	d := s.cfg.HeldDelay
	s.ops.Notifications += int64(len(s.live))
	// Nodes that process p, and nodes that are paused or starved, race on
	// their own (their answers can be late).
	plainHolders := 0
	for _, n := range s.holders[p] {
		m := s.all[n]
		if !m.alive {
			continue
		}
		if s.plain(m) {
			plainHolders++
		}
		w := time.Duration(float64(len(m.hs))-0.5) * d
		s.after(m, w, func() { s.attempt(m, p) })
	}
	for _, n := range s.slowOrPaused.items {
		m := s.all[n]
		if _, owns := m.handlers[p]; owns {
			continue
		}
		w := time.Duration(float64(len(m.hs))+0.5) * d
		s.after(m, w, func() { s.attempt(m, p) })
	}
	plainOthers := len(s.bucket) - plainHolders
	if plainOthers == 0 {
		return
	}
	// Among the plain nodes that do not process p, the ones holding the
	// fewest partitions answer first; one of them (Redis serialises the
	// tied HSETNX) reaches the store first. The others' HSETNX all fail:
	// they are counted here and not simulated one by one.
	for h, b := range s.buckets {
		var first *mMember
		seen := 0
		for _, n := range b.items {
			m := s.all[n]
			if _, owns := m.handlers[p]; owns {
				continue
			}
			seen++
			if s.rng.IntN(seen) == 0 {
				first = m
			}
		}
		if first == nil {
			continue
		}
		s.ops.Writes += int64(plainOthers - 1)
		w := time.Duration(float64(h)+0.5) * d
		s.after(first, w, func() { s.attempt(first, p) })
		return
	}
}

// attempt: node m's HSETNX on the grab hash for p.
func (s *seedModel) attempt(m *mMember, p int32) {
	if !s.inSet[p] || !s.op(true, 0) {
		return
	}
	sp := &s.parts[p]
	_, owns := m.handlers[p]
	if sp.grab >= 0 {
		// Lost the race.
		if owns {
			s.stop(m, p)
			s.after(m, s.latency(), func() {
				if s.op(true, 0) { // HDEL allocation (whoever is in it)
					sp.alloc = -1
				}
				if s.op(true, 0) { // PUBLISH allocated
					s.s.After(s.latency(), func() { s.allocated(p) })
				}
			})
		}
		return
	}
	sp.grab, sp.grabAt = m.n, s.s.Now()
	s.after(m, s.cfg.MinGrab, func() {
		if s.op(true, 0) { // HDEL grab
			sp.grab = -1
		}
	})
	if owns {
		return
	}
	s.after(m, s.latency(), func() {
		if !s.op(false, 1) { // HGET allocation
			return
		}
		if sp.alloc < 0 || sp.alloc == m.n {
			s.takeover(m, p)
			return
		}
		// Someone is processing: wait for its "allocated", at most the
		// maximum shutdown time.
		sp.waiting = m.n
		sp.waitTimer.Stop()
		sp.waitTimer = s.s.After(s.cfg.MaxShutdown, func() {
			if sp.waiting == m.n {
				sp.waiting = -1
				s.after(m, 0, func() { s.takeover(m, p) })
			}
		})
	})
}

// allocated: the "allocated" notification for p reaches every node.
func (s *seedModel) allocated(p int32) {
	s.ops.Notifications += int64(len(s.live))
	sp := &s.parts[p]
	if sp.waiting < 0 {
		return
	}
	m := s.all[sp.waiting]
	sp.waiting = -1
	sp.waitTimer.Stop()
	s.after(m, 0, func() { s.takeover(m, p) })
}

func (s *seedModel) takeover(m *mMember, p int32) {
	if !s.inSet[p] || !s.op(true, 0) { // HSET allocation
		return
	}
	sp := &s.parts[p]
	sp.alloc = m.n
	sp.epoch++
	s.env.Rec.Granted(s.ids[p], sp.epoch)
	s.start(m, p, sp.epoch)
}

// leave: stop everything, give the allocations back (HDEL + PUBLISH each)
// and finish the pending HDELs of won grabs.
func (s *seedModel) leave(m *mMember) {
	for p := range s.parts {
		sp := &s.parts[p]
		if sp.grab == m.n && s.op(true, 0) {
			sp.grab = -1
		}
		if sp.alloc == m.n {
			if s.op(true, 0) {
				sp.alloc = -1
			}
			if s.op(true, 0) {
				pp := int32(p)
				s.s.After(s.latency(), func() { s.allocated(pp) })
			}
		}
	}
}

func (s *seedModel) crashed(m *mMember) {}

func (s *seedModel) preassign(p int32, m *mMember) uint64 {
	sp := &s.parts[p]
	sp.alloc = m.n
	sp.epoch++
	s.env.Rec.Granted(s.ids[p], sp.epoch)
	return sp.epoch
}

func (s *seedModel) partitionsChanged(added, removed []int32) {
	for _, p := range removed {
		// Nodes stop processing a partition that is gone.
		for _, m := range s.live {
			s.stop(m, p)
		}
		s.parts[p].timer.Stop()
		s.parts[p].timer = nil
	}
	if len(s.live) == 0 {
		return
	}
	for _, p := range added {
		s.arm(p, time.Duration(s.rng.Int64N(int64(s.cfg.NormalLease))))
	}
}

// accept: the seed has no fencing; a checkpoint is a plain write.
func (s *seedModel) accept(m *mMember, h *mHandler) bool { return true }
