// Package tracker watches the handlers of an in-process fleet: which member
// runs which partition, how many handlers run at once for one partition, how
// many partitions changed member. The demo, in-process (mem://) measurements
// and the tests use it to decide when a rebalance is over, from what handlers actually do
// rather than from what the store says.
package tracker

import (
	"sync"

	"github.com/herdhq/herd"
)

// Tracker records handler starts and stops. Safe for concurrent use.
//
// It is built for a million partitions in one process: a partition costs a
// map entry and a 32-byte record, and WaitBalanced, which wakes on every
// handler start and stop, checks counters kept up to date (O(members)) and
// walks the partitions only once those say the fleet may be balanced.
type Tracker struct {
	mu            sync.Mutex
	partIdx       map[string]int32 // partition -> index in parts
	parts         []pstate
	memberIdx     map[string]int32 // member -> index in members and sole
	members       []string
	sole          []int // per member: partitions it alone runs
	running       int   // partitions with at least one handler
	single        int   // partitions with exactly one handler
	moves         int
	maxConcurrent int
	changed       chan struct{} // closed on the next change; nil until someone waits
}

// pstate is one partition: who runs it and who ran it last.
type pstate struct {
	id    string
	last  int32 // member that last started it, -1 if none
	m, n  int32 // the first member running it and its handler count (n 0: none)
	more  []runner
	total int32 // handlers running it, all members together
}

// runner is a member running a partition beside pstate.m (rare: a handoff
// overlap, or a stalled member's handlers).
type runner struct{ m, n int32 }

// New returns an empty tracker.
func New() *Tracker {
	return &Tracker{partIdx: map[string]int32{}, memberIdx: map[string]int32{}}
}

// Wrap returns a handler that records member's handler runs around inner
// (nil inner: wait for cancellation).
func (t *Tracker) Wrap(member string, inner herd.Handler) herd.Handler {
	return func(c *herd.Claim) error {
		t.started(member, c.Partition)
		defer t.stopped(member, c.Partition)
		if inner == nil {
			<-c.Context().Done()
			return nil
		}
		return inner(c)
	}
}

func (t *Tracker) member(name string) int32 {
	i, ok := t.memberIdx[name]
	if !ok {
		i = int32(len(t.members))
		t.memberIdx[name] = i
		t.members = append(t.members, name)
		t.sole = append(t.sole, 0)
	}
	return i
}

func (t *Tracker) part(p string) *pstate {
	i, ok := t.partIdx[p]
	if !ok {
		i = int32(len(t.parts))
		t.partIdx[p] = i
		t.parts = append(t.parts, pstate{id: p, last: -1})
	}
	return &t.parts[i]
}

// soleRunner is the member running ps alone, or -1.
func (ps *pstate) soleRunner() int32 {
	if ps.total != 1 {
		return -1
	}
	if ps.n == 1 {
		return ps.m
	}
	return ps.more[0].m
}

// count is how many handlers member m runs for ps.
func (ps *pstate) count(m int32) int32 {
	if ps.n > 0 && ps.m == m {
		return ps.n
	}
	for _, r := range ps.more {
		if r.m == m {
			return r.n
		}
	}
	return 0
}

// add changes member m's handler count for ps by d (+1 or -1).
func (ps *pstate) add(m, d int32) {
	ps.total += d
	switch {
	case ps.n > 0 && ps.m == m:
		ps.n += d
		if ps.n == 0 && len(ps.more) > 0 {
			ps.m, ps.n = ps.more[0].m, ps.more[0].n
			ps.more = ps.more[1:]
		}
		return
	case ps.n == 0:
		ps.m, ps.n = m, d
		return
	}
	for i := range ps.more {
		if ps.more[i].m == m {
			ps.more[i].n += d
			if ps.more[i].n == 0 {
				ps.more = append(ps.more[:i], ps.more[i+1:]...)
			}
			return
		}
	}
	ps.more = append(ps.more, runner{m, d})
}

// change applies d to member m's handlers of ps, keeping the counters.
func (t *Tracker) change(ps *pstate, m, d int32) {
	if s := ps.soleRunner(); s >= 0 {
		t.single--
		t.sole[s]--
	}
	if ps.total > 0 {
		t.running--
	}
	ps.add(m, d)
	if ps.total > 0 {
		t.running++
	}
	if s := ps.soleRunner(); s >= 0 {
		t.single++
		t.sole[s]++
	}
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

func (t *Tracker) started(member, p string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ps := t.member(member), t.part(p)
	if ps.last >= 0 && ps.last != m {
		t.moves++
	}
	ps.last = m
	t.change(ps, m, 1)
	t.maxConcurrent = max(t.maxConcurrent, int(ps.total))
}

func (t *Tracker) stopped(member, p string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.change(t.part(p), t.member(member), -1)
}

// Reset zeroes the move counter and the concurrency maximum (not who runs
// what), to measure one step.
func (t *Tracker) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.moves = 0
	t.maxConcurrent = 0
	for i := range t.parts {
		t.maxConcurrent = max(t.maxConcurrent, int(t.parts[i].total))
	}
}

// Moves is how many times a partition was started on a member other than
// the one that ran it before, since the last Reset.
func (t *Tracker) Moves() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.moves
}

// MaxConcurrent is the most handlers seen running at once for one partition
// since the last Reset.
func (t *Tracker) MaxConcurrent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.maxConcurrent
}

// Owners maps each partition with exactly one running handler to its member.
func (t *Tracker) Owners() map[string]string { return t.OwnersExcept("") }

// OwnersExcept is Owners ignoring the handlers of member except (a stalled
// member whose handlers still exist).
func (t *Tracker) OwnersExcept(except string) map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ex, ok := t.memberIdx[except]
	if !ok {
		ex = -1
	}
	out := make(map[string]string, t.single)
	for i := range t.parts {
		ps := &t.parts[i]
		n := ps.total
		if ex >= 0 {
			n -= ps.count(ex)
		}
		if n != 1 {
			continue
		}
		owner := ps.m
		if ps.n == 0 || owner == ex {
			for _, r := range ps.more {
				if r.m != ex {
					owner = r.m
				}
			}
		}
		out[ps.id] = t.members[owner]
	}
	return out
}
