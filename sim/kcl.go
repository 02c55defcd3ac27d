package sim

import "time"

// KCL models the Kinesis Client Library 2.x lease coordinator (LeaseManagementConfig
// defaults: failoverTimeMillis 10,000, epsilonMillis 25,
// maxLeasesToStealAtOneTime 1, maxLeasesForWorker unlimited):
//
//   - One lease item per shard in a DynamoDB table: owner, leaseCounter,
//     checkpoint. The renewer renews every held lease individually every
//     failover/3 - epsilon = 3.3 s: a conditional write (counter unchanged)
//     that increments the counter. A renewal that finds the counter changed
//     means the lease was stolen: the worker drops it and stops that shard.
//     A lease whose renewals have failed for longer than the failover time
//     is dropped by its own worker (it does not renew expired leases).
//   - The taker runs every (failover + epsilon) x 2 = 20 s: it scans the
//     whole table (one Scan, every item) and notes for each lease the time
//     at which it last saw the counter change. A lease whose counter has not
//     changed for longer than the failover time, or that has no owner, is
//     available. Workers are the owners of unexpired leases plus the taker
//     itself (an idle worker is invisible). target = ceil(leases/workers).
//     The taker takes up to target - mine available leases at once (shuffled,
//     one conditional write each); if none is available, it steals from the
//     most loaded worker: min(needed, its excess) leases, or 1 if that
//     worker has exactly target and it needs more than one, but never more
//     than maxLeasesToStealAtOneTime. A worker short by exactly one never
//     steals from a worker at target.
//   - Shutdown does not release leases: they expire.
//   - Checkpoints are conditional on the lease (owner and concurrency
//     token): a worker that lost its lease cannot checkpoint.
//
// Expiry is judged by each taker from the counter changes it sees between
// its own scans, on its monotonic clock: a wall-clock jump has no effect.
type KCL struct {
	Failover time.Duration // failoverTimeMillis, default 10 s
	Epsilon  time.Duration // epsilonMillis, default 25 ms
	MaxSteal int           // maxLeasesToStealAtOneTime, default 1
}

func (k KCL) withDefaults() KCL {
	if k.Failover == 0 {
		k.Failover = 10 * time.Second
	}
	if k.Epsilon == 0 {
		k.Epsilon = 25 * time.Millisecond
	}
	if k.MaxSteal == 0 {
		k.MaxSteal = 1
	}
	return k
}

func (k KCL) renewInterval() time.Duration { return k.Failover/3 - k.Epsilon }
func (k KCL) takerInterval() time.Duration { return (k.Failover + k.Epsilon) * 2 }

func (k KCL) Name() string { return "kcl-2.x" }

func (k KCL) Describe() string {
	k = k.withDefaults()
	return "Kinesis Client Library 2.x lease coordinator model: failover " + fmtDur(k.Failover) +
		", renew every lease every " + fmtDur(k.renewInterval()) + ", taker scans all leases every " +
		fmtDur(k.takerInterval()) + ", steals at most 1 from the most loaded worker, fenced checkpoints"
}

// FailoverBound: a lease is seen expired by a taker one to two taker
// intervals after its last renewal, and taken at that scan.
func (k KCL) FailoverBound() time.Duration {
	k = k.withDefaults()
	return k.Failover + 2*k.takerInterval()
}

func (k KCL) NewFleet(env *Env) (Fleet, error) {
	m := &kclModel{cfg: k.withDefaults(), head: -1, tail: -1}
	m.model = newModel(env, m)
	return m, nil
}

type kclLease struct {
	owner      int32 // incarnation, -1 none
	counter    uint64
	epoch      uint64 // concurrency token: a new one on every take
	lastChange time.Duration
	exists     bool
	prev, next int32 // the change list: leases in order of lastChange
}

type kclHeld struct {
	counter uint64
	lastOK  time.Duration
}

type kclMember struct {
	held     map[int32]*kclHeld
	prevScan time.Duration // -1 before the first successful scan
}

type kclModel struct {
	*model
	cfg KCL

	leases     []kclLease
	head, tail int32
	nullSet    denseSet
	byOwner    map[int32]*sparseSet
	owners     sparseSet
}

func (k *kclModel) grow(n int) {
	for len(k.leases) < n {
		k.leases = append(k.leases, kclLease{owner: -1, prev: -1, next: -1})
	}
	k.nullSet.grow(n)
}

func (k *kclModel) unlink(p int32) {
	l := &k.leases[p]
	if l.prev >= 0 {
		k.leases[l.prev].next = l.next
	} else if k.head == p {
		k.head = l.next
	}
	if l.next >= 0 {
		k.leases[l.next].prev = l.prev
	} else if k.tail == p {
		k.tail = l.prev
	}
	l.prev, l.next = -1, -1
}

// touch records a counter change of p now: it moves to the end of the
// change list.
func (k *kclModel) touch(p int32) {
	k.unlink(p)
	l := &k.leases[p]
	l.lastChange = k.s.Now()
	l.prev = k.tail
	if k.tail >= 0 {
		k.leases[k.tail].next = p
	} else {
		k.head = p
	}
	k.tail = p
}

func (k *kclModel) setOwner(p, owner int32) {
	l := &k.leases[p]
	if l.owner >= 0 {
		s := k.byOwner[l.owner]
		s.remove(p)
		if s.len() == 0 {
			k.owners.remove(l.owner)
		}
	} else {
		k.nullSet.remove(p)
	}
	l.owner = owner
	if owner < 0 {
		if l.exists {
			k.nullSet.add(p)
		}
		return
	}
	if k.byOwner == nil {
		k.byOwner = map[int32]*sparseSet{}
	}
	s := k.byOwner[owner]
	if s == nil {
		s = &sparseSet{}
		k.byOwner[owner] = s
	}
	s.add(p)
	k.owners.add(owner)
}

func (k *kclModel) state(m *mMember) *kclMember { return m.ext.(*kclMember) }

func (k *kclModel) join(m *mMember) {
	m.ext = &kclMember{held: map[int32]*kclHeld{}, prevScan: -1}
	k.after(m, 0, func() { k.take(m) })
	k.after(m, k.cfg.renewInterval(), func() { k.renew(m) })
}

func (k *kclModel) drop(m *mMember, p int32) {
	delete(k.state(m).held, p)
	k.stop(m, p)
}

// renew is the lease renewer: one conditional write per held lease.
func (k *kclModel) renew(m *mMember) {
	st := k.state(m)
	now := k.s.Now()
	var batch []int32
	for i := len(m.hs) - 1; i >= 0; i-- {
		p := m.hs[i].p
		h := st.held[p]
		if h == nil {
			continue
		}
		if now-h.lastOK > k.cfg.Failover {
			k.drop(m, p) // expired on our own clock: not renewed, shard shut down
			continue
		}
		batch = append(batch, p)
	}
	k.after(m, k.latency(), func() {
		for _, p := range batch {
			h := st.held[p]
			if h == nil {
				continue
			}
			if !k.op(true, 0) {
				continue
			}
			l := &k.leases[p]
			if !l.exists || l.owner != m.n || l.counter != h.counter {
				k.drop(m, p) // stolen or deleted
				continue
			}
			l.counter++
			k.touch(p)
			h.counter, h.lastOK = l.counter, k.s.Now()
		}
		k.after(m, k.cfg.renewInterval(), func() { k.renew(m) })
	})
}

// take is one pass of the lease taker; the next pass is scheduled a taker
// interval after this one's takes complete.
func (k *kclModel) take(m *mMember) {
	next := func() { k.after(m, k.cfg.takerInterval(), func() { k.take(m) }) }
	st := k.state(m)
	if !k.op(false, k.nIn) {
		next()
		return // Scan failed: no lastScanTime update, nothing taken
	}
	scan := k.s.Now()
	prev := st.prevScan
	st.prevScan = scan

	// Available: unowned leases, and leases whose counter has not changed
	// since our previous scan (taker intervals are longer than the
	// failover time, so such a lease has been still for longer than it).
	avail := append([]int32(nil), k.nullSet.items...)
	stale := map[int32]int{}
	if prev >= 0 {
		for p := k.head; p >= 0 && k.leases[p].lastChange <= prev; p = k.leases[p].next {
			if o := k.leases[p].owner; o >= 0 {
				avail = append(avail, p)
				stale[o]++
			}
		}
	}
	numLeases := k.nIn
	if numLeases == 0 {
		next()
		return
	}
	count := func(o int32) int {
		s := k.byOwner[o]
		if s == nil {
			return 0
		}
		return s.len() - stale[o]
	}
	myCount := count(m.n)
	workers := 1
	for _, o := range k.owners.items {
		if o != m.n && count(o) > 0 {
			workers++
		}
	}
	target := 1
	if workers < numLeases {
		target = (numLeases + workers - 1) / workers
	}
	needed := target - myCount
	if needed <= 0 {
		next()
		return
	}
	var take []int32
	if len(avail) > 0 {
		take = pickDistinct(k.rng, avail, needed)
	} else {
		// Steal from the most loaded worker (ties broken at random).
		most, mostN, ties := int32(-1), -1, 0
		consider := func(o int32, c int) {
			switch {
			case c > mostN:
				most, mostN, ties = o, c, 1
			case c == mostN:
				ties++
				if k.rng.IntN(ties) == 0 {
					most = o
				}
			}
		}
		consider(m.n, myCount)
		for _, o := range k.owners.items {
			if o != m.n {
				if c := count(o); c > 0 {
					consider(o, c)
				}
			}
		}
		n := 0
		if mostN >= target && needed > 0 {
			n = min(needed, mostN-target)
			if needed > 1 && n == 0 {
				n = 1
			}
			n = min(n, k.cfg.MaxSteal)
		}
		if n > 0 && most != m.n {
			take = pickDistinct(k.rng, k.byOwner[most].items, n)
		}
	}
	if len(take) == 0 {
		next()
		return
	}
	type seen struct {
		p       int32
		owner   int32
		counter uint64
	}
	var tries []seen
	for _, p := range take {
		tries = append(tries, seen{p, k.leases[p].owner, k.leases[p].counter})
	}
	k.after(m, k.latency(), func() {
		for _, t := range tries {
			if !k.op(true, 0) {
				continue
			}
			l := &k.leases[t.p]
			if !l.exists || l.owner != t.owner || l.counter != t.counter {
				continue
			}
			l.counter++
			l.epoch++
			k.setOwner(t.p, m.n)
			k.touch(t.p)
			k.env.Rec.Granted(k.ids[t.p], l.epoch)
			st.held[t.p] = &kclHeld{counter: l.counter, lastOK: k.s.Now()}
			k.start(m, t.p, l.epoch)
		}
		next()
	})
}

func (k *kclModel) preassign(p int32, m *mMember) uint64 {
	l := &k.leases[p]
	l.counter++
	l.epoch++
	k.setOwner(p, m.n)
	k.touch(p)
	k.env.Rec.Granted(k.ids[p], l.epoch)
	k.state(m).held[p] = &kclHeld{counter: l.counter, lastOK: k.s.Now()}
	return l.epoch
}

func (k *kclModel) leave(m *mMember)   {}
func (k *kclModel) crashed(m *mMember) {}

func (k *kclModel) partitionsChanged(added, removed []int32) {
	for _, p := range removed {
		// The lease is deleted (shard end); its holder finds out at its
		// next renewal.
		k.setOwner(p, -1)
		k.leases[p].exists = false
		k.nullSet.remove(p)
		k.unlink(p)
	}
	for _, p := range added {
		l := &k.leases[p]
		l.exists = true
		l.counter = 0
		k.setOwner(p, -1)
		k.touch(p)
	}
}

// accept: a checkpoint is an update conditional on the lease the worker
// holds.
func (k *kclModel) accept(m *mMember, h *mHandler) bool {
	l := &k.leases[h.p]
	return l.exists && l.owner == m.n && l.epoch == h.epoch
}

func (k *kclModel) stateChanged(m *mMember, before int) {}
