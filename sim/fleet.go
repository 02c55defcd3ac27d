package sim

import (
	"math/rand/v2"
	"time"

	"github.com/herdhq/herd/store"
)

// Policy is one way of spreading partitions over members: herd itself, or a
// model of a system herd is compared with. The runner creates one Fleet per
// scenario run.
type Policy interface {
	// Name is short and stable: it names rows in the table and files.
	Name() string
	// Describe says in one line what is run and with which constants.
	Describe() string
	// NewFleet starts an empty fleet (no members, no partitions) in env.
	NewFleet(env *Env) (Fleet, error)
	// FailoverBound is the time within which the policy, by its own
	// documented defaults, owns again a partition whose owner crashed.
	// The checker reports a partition left unowned for longer than this
	// after the scenario's last fault.
	FailoverBound() time.Duration
}

// Fleet is a set of member processes running one policy against one store.
// The runner calls its methods from one goroutine, between events, at
// virtual time env.Now(). Member ids are unique among live members; an id
// may come back after Leave or Crash (a restarted process).
//
// A Fleet reports what its members do through env.Rec: Start when a member
// begins running a handler for a partition, Stop when that handler has
// returned, Checkpoint for every checkpoint write with the store's verdict,
// Granted when the store gives a partition a new owner. The runner tells
// env.Rec itself about joins, crashes and pauses, so a Fleet does not.
type Fleet interface {
	// SetPartitions replaces the group's partition set.
	SetPartitions(ps []store.Partition) error
	// AddMember starts a member process with this id.
	AddMember(id string) error
	// Leave shuts the member down gracefully (it may take virtual time:
	// handoffs continue after Leave returns).
	Leave(id string) error
	// Crash kills the member at once: no more store operations, no more
	// handler work, nothing released (kill -9).
	Crash(id string) error
	// Pause stops the member as SIGSTOP would: its timers are late, its
	// handlers make no progress, it answers nothing; Resume continues it
	// (SIGCONT) with everything that came due in the meantime.
	Pause(id string) error
	Resume(id string) error
	// SetSlow makes the member's handlers hog the CPU (true) or not. A
	// starved process runs its timers and notification callbacks late:
	// models delay each of the member's events by a random lag with mean
	// env.SlowLag.
	SetSlow(id string, slow bool) error
	// JumpClock moves the member's wall clock by d (NTP step, VM resume).
	// Monotonic timers are not affected.
	JumpClock(id string, d time.Duration) error
	// SetStore changes the store's behaviour from now on: per-operation
	// latency, failure rate, outage.
	SetStore(f StoreFaults) error
	// Ops counts the store operations made so far by all members.
	Ops() Ops
	// Close stops every member and frees the fleet's resources.
	Close() error
}

// Preassigner is implemented by fleets that can start from a given
// assignment, as if the members had owned their partitions for a while (the
// models: their cold start can take tens of minutes at scale and is not what
// a scenario measures). Fleets that run real member code do not implement
// it: they warm up by joining like any deployment does.
type Preassigner interface {
	// Preassign gives each partition (key) to a member (value) that has
	// joined. It is called once, after the first members were added.
	Preassign(owner map[string]string) error
}

// StoreFaults is how the store behaves.
type StoreFaults struct {
	// Latency is added to every operation.
	Latency time.Duration `json:"latency_ns"`
	// FailureRate is the probability that an operation fails with
	// ErrUnavailable (after the latency) without taking effect.
	FailureRate float64 `json:"failure_rate"`
	// Down makes every operation fail (store outage, connection cut).
	Down bool `json:"down"`
}

// Ops counts store operations. A list or snapshot of the whole group is one
// read however many records it returns; Rows counts the records returned,
// which is what makes a poll expensive as the group grows. Checkpoint
// writes are counted apart from the coordination writes: every policy makes
// the same checkpoints, and what differs is the cost of coordination.
type Ops struct {
	Reads int64 `json:"reads"`
	// LogReads are reads of a log of changes (herd's Changes), apart
	// from Reads (lists and snapshots of the group, and herd's checks of
	// its own records).
	LogReads    int64 `json:"log_reads"`
	Writes      int64 `json:"writes"`
	Rows        int64 `json:"rows"`
	Checkpoints int64 `json:"checkpoints"`
	Failed      int64 `json:"failed"`
	// Notifications counts messages delivered through the store's change
	// feed / pub-sub (one per receiving member).
	Notifications int64 `json:"notifications"`
	// ServerBusy is the time one store server (one Redis core) spends
	// serving these operations, with faultstore.RedisCost's service times.
	ServerBusy time.Duration `json:"server_busy_ns"`
}

func (o Ops) sub(p Ops) Ops {
	return Ops{
		Reads: o.Reads - p.Reads, LogReads: o.LogReads - p.LogReads, Writes: o.Writes - p.Writes, Rows: o.Rows - p.Rows,
		Checkpoints: o.Checkpoints - p.Checkpoints, Failed: o.Failed - p.Failed,
		Notifications: o.Notifications - p.Notifications, ServerBusy: o.ServerBusy - p.ServerBusy,
	}
}

// Env is what a fleet gets from the runner.
type Env struct {
	// Sched is the run's virtual clock. Models schedule their events on it;
	// a goroutine-based fleet installs a Driver on it.
	Sched *Scheduler
	// Rand is the run's random source, seeded from the run's seed; a
	// fleet that draws from it in a deterministic order is reproducible.
	Rand *rand.Rand
	// Rec receives handler starts and stops, grants and checkpoints, and
	// checks the invariants as they come.
	Rec *Recorder
	// Group names the group in the store.
	Group string
	// Members and Partitions are the scenario's size at the start.
	Members, Partitions int
	// Store is how the store behaves at the start of the run.
	Store StoreFaults
	// SlowLag is the mean lag of a CPU-starved member's callbacks.
	SlowLag time.Duration
	// CheckpointEvery is how often a running handler writes a checkpoint.
	CheckpointEvery time.Duration
}

// Now is the current virtual time since the start of the run.
func (e *Env) Now() time.Duration { return e.Sched.Now() }
