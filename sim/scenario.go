package sim

import (
	"fmt"
	"strconv"
	"time"

	"github.com/herdhq/herd/store"
)

// Action is what a scenario step does to the fleet.
type Action int

const (
	Add        Action = iota // start members
	Leave                    // graceful shutdown of members
	Crash                    // kill -9 of members
	Pause                    // SIGSTOP
	Resume                   // SIGCONT
	Slow                     // members' handlers start hogging the CPU
	Unslow                   // ... and stop
	SetStore                 // change the store's latency / failure rate / outage
	ClockJump                // members' wall clocks jump by Step.Jump
	Partitions               // the partition set becomes Step.Partitions partitions
)

var actionNames = [...]string{"add", "leave", "crash", "pause", "resume", "slow", "unslow", "store", "clock-jump", "partitions"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// changesMembership says whether the step changes which members should
// share the partitions (and so moves some partitions at the least).
func (a Action) changesMembership() bool {
	return a == Add || a == Leave || a == Crash || a == Partitions
}

// Step is one timed action of a scenario.
type Step struct {
	// At is the time of the step after the end of the warm-up.
	At      time.Duration
	Do      Action
	Members []string
	// Partitions is the new partition count (Do == Partitions).
	Partitions int
	// Store is the store's new behaviour (Do == SetStore).
	Store StoreFaults
	// Jump is the clock jump (Do == ClockJump).
	Jump time.Duration
}

func (s Step) String() string {
	switch s.Do {
	case Partitions:
		return fmt.Sprintf("+%s partitions=%d", fmtDur(s.At), s.Partitions)
	case SetStore:
		return fmt.Sprintf("+%s store latency=%s failures=%.0f%% down=%t", fmtDur(s.At), fmtDur(s.Store.Latency), 100*s.Store.FailureRate, s.Store.Down)
	case ClockJump:
		return fmt.Sprintf("+%s clock-jump %s %v", fmtDur(s.At), fmtDur(s.Jump), s.Members)
	}
	if len(s.Members) > 4 {
		return fmt.Sprintf("+%s %s %d members", fmtDur(s.At), s.Do, len(s.Members))
	}
	return fmt.Sprintf("+%s %s %v", fmtDur(s.At), s.Do, s.Members)
}

// Scenario is a script run on a fleet: Members members join at time 0 and
// share Partitions partitions; once the fleet is balanced and has been quiet
// for the settle time (the warm-up), the steps run at their times, and the
// run ends Duration after the warm-up.
type Scenario struct {
	Name  string
	About string
	// Partitions and Members at the start.
	Partitions int
	Members    int
	Steps      []Step
	// MeasureFrom is the index of the step after which recovery (time to
	// balance, time until every partition is owned, the failover bound) is
	// measured; -1 means the last step.
	MeasureFrom int
	// Duration is the length of the run after the warm-up.
	Duration time.Duration
	// Large marks the scenarios that take minutes of CPU; they run only
	// when asked for.
	Large bool
}

// MemberID is the id of the i-th member of a scenario.
func MemberID(i int) string { return fmt.Sprintf("m%03d", i) }

// PartitionSet returns partitions "0".."n-1" of weight 1 (as herd.Numbered).
func PartitionSet(n int) []store.Partition {
	ps := make([]store.Partition, n)
	for i := range ps {
		ps[i] = store.Partition{ID: strconv.Itoa(i), Weight: 1}
	}
	return ps
}

func memberRange(from, to int) []string {
	ids := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		ids = append(ids, MemberID(i))
	}
	return ids
}

// measureStep is the index of the step recovery is measured from.
func (s Scenario) measureStep() int {
	if s.MeasureFrom >= 0 && s.MeasureFrom < len(s.Steps) {
		return s.MeasureFrom
	}
	return len(s.Steps) - 1
}

// Scenarios returns the standard scenarios, the large ones last.
func Scenarios() []Scenario {
	const min = time.Minute
	sc := []Scenario{
		{
			Name: "scale-out-1-4", About: "1 member owns 32 partitions; 3 more join",
			Partitions: 32, Members: 1, MeasureFrom: -1, Duration: 5 * min,
			Steps: []Step{{At: 0, Do: Add, Members: memberRange(1, 4)}},
		},
		{
			Name: "scale-out-10-20", About: "10 members own 1,024 partitions; 10 more join",
			Partitions: 1024, Members: 10, MeasureFrom: -1, Duration: 20 * min,
			Steps: []Step{{At: 0, Do: Add, Members: memberRange(10, 20)}},
		},
		{
			Name: "graceful-leave", About: "4 members, 32 partitions; one shuts down gracefully",
			Partitions: 32, Members: 4, MeasureFrom: -1, Duration: 5 * min,
			Steps: []Step{{At: 0, Do: Leave, Members: []string{MemberID(3)}}},
		},
		{
			Name: "crash-1-of-4", About: "4 members, 32 partitions; one is killed",
			Partitions: 32, Members: 4, MeasureFrom: -1, Duration: 5 * min,
			Steps: []Step{{At: 0, Do: Crash, Members: []string{MemberID(3)}}},
		},
		{
			Name: "crash-10pct-of-100", About: "100 members, 10,000 partitions; 10 are killed at once",
			Partitions: 10000, Members: 100, MeasureFrom: -1, Duration: 10 * min,
			Steps: []Step{{At: 0, Do: Crash, Members: memberRange(90, 100)}},
		},
		rollingRestart(20, 1024, 5*time.Second, 30*time.Second),
		{
			Name: "slow-member-10min", About: "8 members, 64 partitions; one member's handlers hog the CPU for 10 minutes (it should keep its partitions)",
			Partitions: 64, Members: 8, MeasureFrom: 0, Duration: 12 * min,
			Steps: []Step{
				{At: 0, Do: Slow, Members: []string{MemberID(3)}},
				{At: 10 * min, Do: Unslow, Members: []string{MemberID(3)}},
			},
		},
		{
			Name: "pause-90s", About: "4 members, 32 partitions; one is stopped (SIGSTOP) for 90 s, then continues",
			Partitions: 32, Members: 4, MeasureFrom: 0, Duration: 5 * min,
			Steps: []Step{
				{At: 0, Do: Pause, Members: []string{MemberID(3)}},
				{At: 90 * time.Second, Do: Resume, Members: []string{MemberID(3)}},
			},
		},
		{
			Name: "store-outage-30s", About: "4 members, 32 partitions; the store is unreachable for 30 s",
			Partitions: 32, Members: 4, MeasureFrom: -1, Duration: 5 * min,
			Steps: []Step{
				{At: 0, Do: SetStore, Store: StoreFaults{Latency: DefaultStoreLatency, Down: true}},
				{At: 30 * time.Second, Do: SetStore, Store: StoreFaults{Latency: DefaultStoreLatency}},
			},
		},
		{
			Name: "flaky-store-crash", About: "8 members, 256 partitions; store latency 100 ms and 5% of operations fail; one member is killed a minute in",
			Partitions: 256, Members: 8, MeasureFrom: -1, Duration: 6 * min,
			Steps: []Step{
				{At: 0, Do: SetStore, Store: StoreFaults{Latency: 100 * time.Millisecond, FailureRate: 0.05}},
				{At: time.Minute, Do: Crash, Members: []string{MemberID(7)}},
			},
		},
		{
			Name: "clock-jump", About: "4 members, 32 partitions; one member's wall clock jumps 2 minutes ahead",
			Partitions: 32, Members: 4, MeasureFrom: -1, Duration: 5 * min,
			Steps: []Step{{At: 0, Do: ClockJump, Members: []string{MemberID(3)}, Jump: 2 * min}},
		},
		{
			Name: "partitions-change", About: "4 members; 32 partitions become 48, then 40",
			Partitions: 32, Members: 4, MeasureFrom: -1, Duration: 6 * min,
			Steps: []Step{
				{At: 0, Do: Partitions, Partitions: 48},
				{At: 2 * min, Do: Partitions, Partitions: 40},
			},
		},
		{
			// The log issue's large bench scenario, each member on a
			// machine of its own: the bench runs it in one process.
			Name: "large-100x100k-join", About: "100 members, 100,000 partitions; 10 new ones join",
			Partitions: 100000, Members: 100, MeasureFrom: -1, Duration: 3 * min, Large: true,
			Steps: []Step{{At: 0, Do: Add, Members: memberRange(100, 110)}},
		},
		{
			Name: "large-100x100k-crash", About: "100 members, 100,000 partitions; 10 are killed at once",
			Partitions: 100000, Members: 100, MeasureFrom: -1, Duration: 3 * min, Large: true,
			Steps: []Step{{At: 0, Do: Crash, Members: memberRange(90, 100)}},
		},
		{
			Name: "large-1000x100k", About: "1,000 members, 100,000 partitions; 10 are killed, a minute later 10 new ones join",
			Partitions: 100000, Members: 1000, MeasureFrom: -1, Duration: 5 * min, Large: true,
			Steps: []Step{
				{At: 0, Do: Crash, Members: memberRange(990, 1000)},
				{At: time.Minute, Do: Add, Members: memberRange(1000, 1010)},
			},
		},
	}
	return sc
}

// rollingRestart restarts every member in turn: it leaves gracefully, comes
// back (same id, new process) after down, and the next one goes every.
func rollingRestart(n, partitions int, down, every time.Duration) Scenario {
	s := Scenario{
		Name:       fmt.Sprintf("rolling-restart-%d", n),
		About:      fmt.Sprintf("%d members, %d partitions; each restarts in turn (down %s, one every %s)", n, partitions, fmtDur(down), fmtDur(every)),
		Partitions: partitions, Members: n, MeasureFrom: -1,
		Duration: time.Duration(n)*every + 5*time.Minute,
	}
	for i := 0; i < n; i++ {
		at := time.Duration(i) * every
		s.Steps = append(s.Steps,
			Step{At: at, Do: Leave, Members: []string{MemberID(i)}},
			Step{At: at + down, Do: Add, Members: []string{MemberID(i)}})
	}
	return s
}
