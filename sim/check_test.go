package sim

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// ideal is a test policy that does what herd promises, instantly: after
// every change it moves the fewest partitions to a balanced assignment,
// stopping the old handler before starting the new one, with a new epoch
// per move and fenced checkpoints. A bug can be injected to prove that the
// checker catches it.
type ideal struct{ bug string }

const (
	bugNone       = ""
	bugDouble     = "double"    // partition "0" also runs on a second member
	bugBackwards  = "backwards" // a new owner restarts from an old position
	bugStale      = "stale"     // a moved partition's old owner checkpoints once more, accepted
	bugNoFailover = "no-failover"
)

func (p ideal) Name() string                 { return "ideal-" + p.bug }
func (p ideal) Describe() string             { return "test policy" }
func (p ideal) FailoverBound() time.Duration { return 5 * time.Second }
func (p ideal) NewFleet(env *Env) (Fleet, error) {
	f := &idealFleet{env: env, bug: p.bug, owner: map[string]string{}, epoch: map[string]uint64{}, pos: map[string]uint64{}}
	f.tick()
	return f, nil
}

type idealFleet struct {
	env     *Env
	bug     string
	parts   []string
	members []string // running, in join order
	paused  map[string]bool
	owner   map[string]string
	epoch   map[string]uint64
	pos     map[string]uint64 // accepted checkpoint
	extra   string            // bugDouble: the second member running "0"
	stale   []staleWrite      // bugStale: writes of old owners, made at the next tick
	ops     Ops
}

type staleWrite struct {
	member, partition string
	epoch             uint64
}

func (f *idealFleet) tick() {
	f.env.Sched.After(time.Second, func() {
		ids := slices.Sorted(func(yield func(string) bool) {
			for p := range f.owner {
				if !yield(p) {
					return
				}
			}
		})
		for _, p := range ids {
			m := f.owner[p]
			if f.paused[m] {
				continue
			}
			f.pos[p] += 1000
			f.ops.Checkpoints++
			f.env.Rec.Checkpoint(m, p, f.epoch[p], f.pos[p], true)
		}
		for _, w := range f.stale {
			f.env.Rec.Checkpoint(w.member, w.partition, w.epoch, f.pos[w.partition]+1, true) // accepted although stale
		}
		f.stale = nil
		f.tick()
	})
}

func (f *idealFleet) move(p, to string) {
	if from, ok := f.owner[p]; ok {
		f.env.Rec.Stop(from, p)
		if f.bug == bugStale {
			f.stale = append(f.stale, staleWrite{from, p, f.epoch[p]})
		}
	}
	if to == "" {
		delete(f.owner, p)
		return
	}
	f.epoch[p]++
	f.owner[p] = to
	f.ops.Writes++
	f.env.Rec.Granted(p, f.epoch[p])
	f.env.Rec.Start(to, p, f.epoch[p])
	if f.bug == bugBackwards {
		f.pos[p] -= min(f.pos[p], 1500) // restart from a position before the last checkpoint
	}
}

// rebalance: orphans and excess go to the members below their share.
func (f *idealFleet) rebalance(crashed bool) {
	n := len(f.members)
	live := map[string]bool{}
	for _, m := range f.members {
		live[m] = true
	}
	count := map[string]int{}
	var free []string
	for _, p := range f.parts {
		m, ok := f.owner[p]
		switch {
		case !ok || !live[m]:
			if crashed && f.bug == bugNoFailover && ok {
				continue // leave the dead member's partitions alone
			}
			free = append(free, p)
		default:
			count[m]++
		}
	}
	if n == 0 {
		return
	}
	q, extra := len(f.parts)/n, len(f.parts)%n
	order := slices.Clone(f.members)
	sort.SliceStable(order, func(i, j int) bool { return count[order[i]] > count[order[j]] })
	target := map[string]int{}
	for i, m := range order {
		target[m] = q
		if i < extra {
			target[m]++
		}
	}
	for _, p := range f.parts {
		if m, ok := f.owner[p]; ok && live[m] && count[m] > target[m] {
			count[m]--
			free = append(free, p)
		}
	}
	for _, m := range order {
		for count[m] < target[m] && len(free) > 0 {
			p := free[0]
			free = free[1:]
			f.move(p, m)
			count[m]++
		}
	}
	if f.bug == bugDouble && crashed && f.extra == "" && n > 1 {
		for _, m := range f.members {
			if m != f.owner["0"] {
				f.extra = m
				f.env.Rec.Start(m, "0", f.epoch["0"])
				break
			}
		}
	}
}

func (f *idealFleet) SetPartitions(ps []store.Partition) error {
	f.parts = f.parts[:0]
	for _, p := range ps {
		f.parts = append(f.parts, p.ID)
	}
	for p := range f.owner {
		if !slices.Contains(f.parts, p) {
			f.move(p, "")
		}
	}
	f.rebalance(false)
	return nil
}

func (f *idealFleet) AddMember(id string) error {
	f.members = append(f.members, id)
	f.rebalance(false)
	return nil
}

func (f *idealFleet) remove(id string) {
	f.members = slices.DeleteFunc(f.members, func(m string) bool { return m == id })
}

func (f *idealFleet) Leave(id string) error {
	f.remove(id)
	for p, m := range f.owner {
		if m == id {
			f.env.Rec.Stop(m, p)
			delete(f.owner, p)
		}
	}
	f.rebalance(false)
	return nil
}

func (f *idealFleet) Crash(id string) error {
	f.remove(id)
	f.rebalance(true)
	return nil
}

func (f *idealFleet) Pause(id string) error {
	if f.paused == nil {
		f.paused = map[string]bool{}
	}
	f.paused[id] = true
	return nil
}
func (f *idealFleet) Resume(id string) error                { delete(f.paused, id); return nil }
func (f *idealFleet) SetSlow(string, bool) error            { return nil }
func (f *idealFleet) JumpClock(string, time.Duration) error { return nil }
func (f *idealFleet) SetStore(StoreFaults) error            { return nil }
func (f *idealFleet) Ops() Ops                              { return f.ops }
func (f *idealFleet) Close() error                          { return nil }

var checkScenario = Scenario{
	Name: "check", About: "4 members, 32 partitions; one joins, one crashes",
	Partitions: 32, Members: 4, MeasureFrom: -1, Duration: time.Minute,
	Steps: []Step{
		{At: 0, Do: Add, Members: []string{MemberID(4)}},
		{At: 10 * time.Second, Do: Crash, Members: []string{MemberID(1)}},
	},
}

func TestCheckerPassesIdealPolicy(t *testing.T) {
	res, err := Run(context.Background(), ideal{}, checkScenario, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := sumViolations(res.Violations) + sumViolations(res.WarmupViolations); n != 0 {
		t.Fatalf("ideal policy: %d violations: %v", n, res.Details)
	}
	m := res.Metrics
	// Join of a 5th member to 4x8: 6 moves (8,8,8,8 -> 7,7,6,6,6); crash
	// of a member holding 6 or 7: those move.
	if m.Moves != m.MinMoves || m.TimeToBalance > time.Second || m.DoubleSeconds != 0 {
		t.Fatalf("ideal policy: moves %d (min %d), balance %v, double %.1f", m.Moves, m.MinMoves, m.TimeToBalance, m.DoubleSeconds)
	}
}

// TestCheckerCatchesInjectedBugs runs the same scenario with deliberately
// broken versions of the ideal policy: the checker must name each breach.
func TestCheckerCatchesInjectedBugs(t *testing.T) {
	for _, tc := range []struct {
		bug  string
		want Invariant
	}{
		{bugDouble, Exclusive},
		{bugBackwards, Monotonic},
		{bugStale, Fenced},
		{bugNoFailover, Failover},
	} {
		t.Run(tc.bug, func(t *testing.T) {
			res, err := Run(context.Background(), ideal{bug: tc.bug}, checkScenario, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Violations[tc.want] == 0 {
				t.Fatalf("bug %q: no %s violation reported; got %v", tc.bug, tc.want, res.Violations)
			}
			for _, v := range res.Details {
				if v.Invariant == tc.want {
					t.Logf("caught: %s", v)
					break
				}
			}
		})
	}
}

func TestCheckerUnit(t *testing.T) {
	var now time.Duration
	chk := NewChecker(10 * time.Second)
	rec := NewRecorder(func() time.Duration { return now }, chk)
	rec.setPartitions([]string{"a", "b"})
	rec.joined("x")
	rec.joined("y")
	rec.Start("x", "a", 1)
	rec.Start("y", "b", 1)
	now = time.Second
	rec.Start("y", "a", 2) // second live handler for a
	now = 3 * time.Second
	rec.Stop("x", "a")
	rec.Checkpoint("y", "a", 2, 100, true)
	rec.Checkpoint("x", "a", 1, 150, true) // stale epoch, accepted
	rec.Checkpoint("y", "a", 2, 120, true) // backwards from 150
	rec.Checkpoint("x", "a", 1, 160, false)
	rec.setPaused("y", true) // b and a lose their live handler
	now = 20 * time.Second
	rec.setPaused("y", false) // 17 s unowned > 10 s bound
	c := chk.Counts()
	if c[Exclusive] != 1 || c[Fenced] != 1 || c[Monotonic] != 1 || c[Failover] != 2 || chk.Rejected() != 1 {
		t.Fatalf("counts %v rejected %d; want one exclusive, fenced, monotonic, two failover, one rejected", c, chk.Rejected())
	}
	v := rec.view(false)
	if v.double != 0 || v.unowned != 0 || v.doubleArea != 2 || v.unownedArea != 2*17 {
		t.Fatalf("view %+v: want double-area 2 and unowned-area 34", v)
	}
}

func sumViolations(m map[Invariant]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
