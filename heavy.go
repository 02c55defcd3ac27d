package herd

// The CPU-heavy steps of the members of one process take turns.

import (
	"runtime"

	"github.com/herdhq/herd/internal/turns"
	"github.com/herdhq/herd/store"
)

// heavy bounds how many of the CPU-heavy steps of the members of this
// process run at once (a full plan, applying the log's entries to the copy
// of the group, copying a new read of it): at most as many as Go runs
// goroutines at once. A member alone in its process never waits for it.
// Many members in one process (a test, herd bench's 100 on two cores)
// would otherwise each have a step of tens of milliseconds runnable at
// once, and every other goroutine of the process, a session's renewal among
// them, would wait for a turn behind them all: in herd bench --scenario
// large a goroutine waited 0.4 s for one in ten of its turns and up to 2.7 s,
// renewals timed out and sessions were lost. Waiting for a token instead,
// the steps leave the scheduler's queue short; they take the same CPU.
//
// A member still to receive partitions (one that joined and has not planned
// yet, or whose plan left partitions to come from others) is served before
// the others: the group is not balanced until it has them, and its steps
// are few. In herd bench --scenario large, ten members joining a hundred
// each waited 0.2-1.1 s for a turn to take in their read of the group, and
// about as long again to apply the log's first entries after it, behind
// the hundred others' plans and entries.
var heavy = turns.New(runtime.GOMAXPROCS(0))

// heavyEntries is the least number of log entries whose handling (checked
// against the aim, applied to the copy) is a heavy step.
const heavyEntries = store.MaxBatch
