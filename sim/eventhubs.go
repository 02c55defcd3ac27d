package sim

import (
	"sort"
	"time"
)

// EventHubs models the Azure Event Hubs event processor's load balancer
// (azeventhubs Processor; the .NET, Java, Python and JS processors follow the
// same design), with its published defaults:
//
//   - Every load-balancing cycle (UpdateInterval, default 10 s; modelled as
//     a uniformly jittered 8-13 s) a processor lists every ownership record
//     (one read returning one row per partition), then writes every record
//     it wants to keep or take in one ClaimOwnership batch: one conditional
//     (ETag) write per record. A write whose ETag no longer matches fails
//     and that partition is not owned.
//   - A record not modified for PartitionExpirationDuration (default 60 s,
//     compared with the processor's own wall clock; the .NET processor
//     uses 30 s) is expired; a record with an empty owner is relinquished.
//     Both count as unowned.
//   - Active owners are the distinct owners of unexpired records, plus the
//     processor itself: a processor that owns nothing is invisible to the
//     others. min = P / owners; a processor may keep min+1 only if
//     P % owners > 0 and it already has min.
//   - "balanced" claims at most one partition per cycle: a random unowned
//     or expired one, else a random one of an owner above the maximum.
//     "greedy" claims as many as it needs per cycle, unowned first, then
//     stolen at random from owners above the maximum.
//   - After the batch, the processor runs exactly the partitions it got:
//     a partition that was stolen keeps being processed by its previous
//     owner until that owner's next cycle (double ownership).
//   - Nothing is released except on shutdown (Close relinquishes every
//     owned record, one write each).
//   - Checkpoints are written to their own record without any ownership
//     condition: a processor that lost a partition can still checkpoint it.
type EventHubs struct {
	// Greedy selects the greedy strategy (default balanced).
	Greedy bool
	// MinInterval, MaxInterval: the time between cycles, uniform in
	// [MinInterval, MaxInterval] (default 8-13 s: the 10 s UpdateInterval
	// with jitter).
	MinInterval, MaxInterval time.Duration
	// Expiration is PartitionExpirationDuration (default 60 s).
	Expiration time.Duration
}

func (e EventHubs) withDefaults() EventHubs {
	if e.MinInterval == 0 {
		e.MinInterval = 8 * time.Second
	}
	if e.MaxInterval == 0 {
		e.MaxInterval = 13 * time.Second
	}
	if e.Expiration == 0 {
		e.Expiration = 60 * time.Second
	}
	return e
}

func (e EventHubs) Name() string {
	if e.Greedy {
		return "eh-greedy"
	}
	return "eh-balanced"
}

func (e EventHubs) Describe() string {
	e = e.withDefaults()
	s := "balanced (1 claim per cycle)"
	if e.Greedy {
		s = "greedy (all needed claims per cycle)"
	}
	return "Event Hubs processor model, " + s + ", cycle " + fmtDur(e.MinInterval) + "-" + fmtDur(e.MaxInterval) +
		", ownership expires " + fmtDur(e.Expiration) + " after the last write, unfenced checkpoints"
}

// FailoverBound: a crashed owner's records expire after Expiration and are
// claimed at the next cycle of a processor that needs them.
func (e EventHubs) FailoverBound() time.Duration {
	e = e.withDefaults()
	return e.Expiration + e.MaxInterval
}

func (e EventHubs) NewFleet(env *Env) (Fleet, error) {
	m := &ehModel{cfg: e.withDefaults()}
	m.model = newModel(env, m)
	return m, nil
}

type ehRecord struct {
	owner   int32 // incarnation; -1 relinquished or never owned
	version uint64
	lastMod time.Duration
	epoch   uint64
	active  bool // counted in active[owner] (unexpired, owned, in the set)
}

type ehExpiry struct {
	at      time.Duration
	p       int32
	version uint64
}

type ehModel struct {
	*model
	cfg EventHubs

	recs   []ehRecord
	free   denseSet             // in-set partitions unowned, relinquished or expired
	active map[int32]*sparseSet // owner -> its active records
	owners sparseSet            // owners with at least one active record
	expq   []ehExpiry           // FIFO: writes happen in time order
	expHd  int
}

type ehClaim struct {
	p       int32
	version uint64
	renew   bool
}

func (e *ehModel) grow(n int) {
	for len(e.recs) < n {
		e.recs = append(e.recs, ehRecord{owner: -1})
	}
	e.free.grow(n)
}

func (e *ehModel) activeOf(o int32) *sparseSet {
	s := e.active[o]
	if s == nil {
		if e.active == nil {
			e.active = map[int32]*sparseSet{}
		}
		s = &sparseSet{}
		e.active[o] = s
	}
	return s
}

func (e *ehModel) setActive(p int32, owner int32) {
	r := &e.recs[p]
	if r.active {
		s := e.active[r.owner]
		s.remove(p)
		if s.len() == 0 {
			e.owners.remove(r.owner)
		}
	} else {
		e.free.remove(p)
	}
	r.active = true
	s := e.activeOf(owner)
	s.add(p)
	e.owners.add(owner)
}

func (e *ehModel) setFree(p int32) {
	r := &e.recs[p]
	if r.active {
		s := e.active[r.owner]
		s.remove(p)
		if s.len() == 0 {
			e.owners.remove(r.owner)
		}
		r.active = false
	}
	if e.inSet[p] {
		e.free.add(p)
	}
}

// expire moves the records not written for Expiration to the free set.
func (e *ehModel) expire(now time.Duration) {
	for e.expHd < len(e.expq) && e.expq[e.expHd].at < now {
		x := e.expq[e.expHd]
		e.expHd++
		r := &e.recs[x.p]
		if r.version == x.version && r.active {
			e.setFree(x.p)
		}
	}
	if e.expHd > 4096 && e.expHd*2 > len(e.expq) {
		e.expq = append(e.expq[:0], e.expq[e.expHd:]...)
		e.expHd = 0
	}
}

// write applies a successful conditional write of owner to p.
func (e *ehModel) write(p int32, owner int32) {
	r := &e.recs[p]
	now := e.s.Now()
	r.version++
	r.lastMod = now
	if owner < 0 {
		e.setFree(p)
		r.owner = -1
		return
	}
	if !r.active || r.owner != owner {
		r.epoch++
		e.env.Rec.Granted(e.ids[p], r.epoch)
	}
	if e.inSet[p] {
		e.setActive(p, owner) // moves p from its previous owner's set
	}
	r.owner = owner
	e.expq = append(e.expq, ehExpiry{at: now + e.cfg.Expiration, p: p, version: r.version})
}

func (e *ehModel) join(m *mMember) { e.after(m, 0, func() { e.cycle(m) }) }

func (e *ehModel) next(m *mMember) {
	d := e.cfg.MinInterval + time.Duration(e.rng.Int64N(int64(e.cfg.MaxInterval-e.cfg.MinInterval)+1))
	e.after(m, d, func() { e.cycle(m) })
}

// listing is what one processor sees in one ListOwnership: its own active
// records, the other active owners with their records, the free ones.
type ehListing struct {
	mine   []int32
	owners []int32
	parts  [][]int32 // parts[i]: active records of owners[i]
	free   []int32
}

func (e *ehModel) list(m *mMember) ehListing {
	now := e.s.Now()
	e.expire(now)
	var l ehListing
	if m.offset == 0 {
		// Fast path: the processor's clock agrees with the store's, so
		// its view is the global one kept up to date incrementally.
		if s := e.active[m.n]; s != nil {
			l.mine = append([]int32(nil), s.items...)
		}
		for _, o := range e.owners.items {
			if o != m.n {
				l.owners = append(l.owners, o)
				l.parts = append(l.parts, e.active[o].items)
			}
		}
		l.free = e.free.items
		return l
	}
	// A processor whose wall clock is off judges expiry by it.
	local := e.wallClock(m)
	byOwner := map[int32][]int32{}
	for p := range e.recs {
		if !e.inSet[p] {
			continue
		}
		r := &e.recs[p]
		if r.owner < 0 || r.version == 0 || local-r.lastMod > e.cfg.Expiration {
			l.free = append(l.free, int32(p))
			continue
		}
		if r.owner == m.n {
			l.mine = append(l.mine, int32(p))
			continue
		}
		if _, ok := byOwner[r.owner]; !ok {
			l.owners = append(l.owners, r.owner)
		}
		byOwner[r.owner] = append(byOwner[r.owner], int32(p))
	}
	sort.Slice(l.owners, func(i, j int) bool { return l.owners[i] < l.owners[j] })
	for _, o := range l.owners {
		l.parts = append(l.parts, byOwner[o])
	}
	return l
}

// cycle is one load-balancing pass. The processor's loop is sequential: the
// next cycle is timed from the end of this one's ClaimOwnership batch.
func (e *ehModel) cycle(m *mMember) {
	if !e.op(false, e.nIn) {
		e.next(m)
		return // ListOwnership failed: give up this cycle, keep processing
	}
	l := e.list(m)
	total := e.nIn
	owners := len(l.owners) + 1
	minRequired := total / owners
	maxAllowed := minRequired
	allowExtra := total%owners > 0
	if allowExtra && len(l.mine) >= minRequired {
		maxAllowed++
	}
	var aboveMax []int // indices into l.owners
	aboveCount := 0
	for i := range l.owners {
		if len(l.parts[i]) > maxAllowed {
			aboveMax = append(aboveMax, i)
			aboveCount += len(l.parts[i])
		}
	}
	claimMore := true
	if len(l.mine) >= maxAllowed {
		claimMore = false
	} else if allowExtra && len(l.mine) == maxAllowed-1 {
		claimMore = len(l.free) > 0 || aboveCount > 0
	}

	claims := make([]ehClaim, 0, len(l.mine)+1)
	for _, p := range l.mine {
		claims = append(claims, ehClaim{p: p, version: e.recs[p].version, renew: true})
	}
	if claimMore {
		var picked []int32
		if e.cfg.Greedy {
			// As many as needed: unowned or expired first, then stolen.
			want := maxAllowed - len(l.mine)
			picked = pickDistinct(e.rng, l.free, want)
			if len(picked) < want {
				picked = append(picked, e.pickAbove(l, aboveMax, aboveCount, want-len(picked))...)
			}
		} else if len(l.free) > 0 {
			picked = pickDistinct(e.rng, l.free, 1)
		} else {
			picked = e.pickAbove(l, aboveMax, aboveCount, 1)
		}
		for _, p := range picked {
			claims = append(claims, ehClaim{p: p, version: e.recs[p].version})
		}
	}

	// The batch reaches the store one latency later; each write is
	// conditional on the version (ETag) seen in the listing.
	e.after(m, e.latency(), func() {
		got := make(map[int32]bool, len(claims))
		for _, c := range claims {
			if !e.op(true, 0) {
				if c.renew {
					got[c.p] = true // an error is not a loss: keep it until the next cycle
				}
				continue
			}
			if e.recs[c.p].version != c.version || !e.inSet[c.p] {
				continue
			}
			e.write(c.p, m.n)
			got[c.p] = true
		}
		// Run exactly what we own now.
		for i := len(m.hs) - 1; i >= 0; i-- {
			if p := m.hs[i].p; !got[p] {
				e.stop(m, p)
			}
		}
		for _, c := range claims {
			if got[c.p] {
				e.start(m, c.p, e.recs[c.p].epoch)
			}
		}
		e.next(m)
	})
}

// pickAbove picks k distinct partitions at random among those of the owners
// above the maximum.
func (e *ehModel) pickAbove(l ehListing, above []int, count, k int) []int32 {
	if count == 0 || k <= 0 {
		return nil
	}
	if k >= count {
		var all []int32
		for _, i := range above {
			all = append(all, l.parts[i]...)
		}
		return pickDistinct(e.rng, all, k)
	}
	seen := map[int32]bool{}
	var out []int32
	for len(out) < k {
		r := e.rng.IntN(count)
		for _, i := range above {
			if r < len(l.parts[i]) {
				if p := l.parts[i][r]; !seen[p] {
					seen[p] = true
					out = append(out, p)
				}
				break
			}
			r -= len(l.parts[i])
		}
	}
	return out
}

// leave relinquishes every record the processor owns (Close).
func (e *ehModel) leave(m *mMember) {
	s := e.active[m.n]
	if s == nil {
		return
	}
	type rel struct {
		p       int32
		version uint64
	}
	var rels []rel
	for _, p := range s.items {
		rels = append(rels, rel{p, e.recs[p].version})
	}
	e.s.After(e.latency(), func() {
		for _, r := range rels {
			if e.op(true, 0) && e.recs[r.p].version == r.version {
				e.write(r.p, -1)
			}
		}
	})
}

func (e *ehModel) crashed(m *mMember) {}

func (e *ehModel) preassign(p int32, m *mMember) uint64 {
	e.write(p, m.n)
	return e.recs[p].epoch
}

func (e *ehModel) partitionsChanged(added, removed []int32) {
	now := e.s.Now()
	e.expire(now)
	for _, p := range removed {
		e.setFree(p)
		e.free.remove(p)
	}
	for _, p := range added {
		r := &e.recs[p]
		if r.owner >= 0 && r.version > 0 && now-r.lastMod <= e.cfg.Expiration {
			e.setActive(p, r.owner)
			e.expq = append(e.expq, ehExpiry{at: r.lastMod + e.cfg.Expiration, p: p, version: r.version})
		} else {
			e.free.add(p)
		}
	}
	// Processors stop removed partitions at their next cycle (they are not
	// in the partition list any more, so not renewed).
}

// accept: Event Hubs checkpoints are not conditional on ownership.
func (e *ehModel) accept(m *mMember, h *mHandler) bool { return true }

func (e *ehModel) stateChanged(m *mMember, before int) {}
