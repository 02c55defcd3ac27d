// Package sim runs partition-assignment scenarios at scale under virtual
// time, checks invariants throughout, and compares herd with the policies it
// replaces, modelled from their published behaviour and default constants.
//
// # Pieces
//
//	Scheduler   the run's virtual clock: a queue of timed events executed in
//	            order on one goroutine (sched.go)
//	Policy      a way of spreading partitions: Name, Describe, FailoverBound,
//	            NewFleet(env) (fleet.go)
//	Fleet       a set of member processes of one policy on one store:
//	            SetPartitions, AddMember, Leave (graceful), Crash (kill -9),
//	            Pause/Resume (SIGSTOP/SIGCONT), SetSlow (handlers hog the CPU),
//	            JumpClock (wall clock steps), SetStore (latency, failure
//	            rate, outage), Ops (store operations), Close
//	Env         what a fleet gets: Sched, Rand (seeded), Rec, Group, the
//	            store's initial behaviour, SlowLag, CheckpointEvery
//	Recorder    what the fleet reports: Start/Stop of each handler, Granted
//	            epochs, every Checkpoint with the store's verdict; it keeps
//	            the aggregates the sampler reads and feeds the Checker
//	Checker     the invariants (check.go)
//	Scenario    a script of timed Steps (scenario.go); Scenarios() is the set
//	Run         one scenario with one policy -> Result (run.go)
//	RunAll      every scenario with every policy -> Report: table, JSON,
//	            one PNG chart per scenario (runall.go, report.go, chart.go)
//
// # Virtual time, for models and for real member code
//
// A fleet may be a discrete-event model or real goroutines. Models schedule
// everything on env.Sched (Env.Sched.After); a callback runs as its member's
// process would: never once the member crashed, when it resumes if it is
// paused, late (by an exponential lag with mean SlowLag) if its CPU is
// starved. The runner moves time only through Sched.RunUntil, so fault steps,
// samples and model events interleave deterministically: a run is a pure
// function of the seed.
//
// A goroutine-based fleet (real member code, which calls time.Now, timers
// and blocks on channels) installs a Driver on env.Sched: before each event
// and at each sample the Scheduler calls Driver.AdvanceTo(t), which lets the
// fleet's goroutines run until virtual time t and returns when they are all
// idle. Inside a testing/synctest bubble that is time.Sleep(t - elapsed)
// followed by synctest.Wait. Herd (herdfleet.go) is that adapter for herd's
// real member code: herd.Join on one memstore, one faultstore per member,
// a handler that processes, checkpoints every CheckpointEvery and writes a
// final checkpoint on handoff. synctest bubbles exist only inside tests:
// herd runs in TestHerdScenarios (invariants required), and the command
// runs its whole work as the one test of testing.Main, so that it can make
// a bubble for each of herd's runs (it registers Herd with a Bubble). One
// command runs every scenario with every policy, herd included, prints the
// table and writes report.json and the charts (docs/simulation.md has its
// output):
//
//	go -C sim run ./cmd/herdsim -large            # about 2 minutes on 2 cores
//	go -C sim run ./cmd/herdsim [-large] [-run regexp] [-out dir] [-policies a,b]
//
// With -large it also measures what one read of the group costs one herd
// member of the large group alone in its process (ProbeReconcile). The
// same report, from go test (HERDSIM_LARGE=1 adds the large scenario):
//
//	HERDSIM_OUT=simout go -C sim test . -run TestReport -timeout 60m -v
//
// Models start from a balanced assignment (they implement Preassigner; their
// cold start takes tens of minutes at scale and is not what is measured);
// real member code warms up by joining. Every run then waits until the fleet
// has been balanced for 30 s (the steady-state window, where steady ops are
// measured), and the scenario's steps start (t0).
//
// # Metrics (per run, after t0)
//
//	balance    from the measured step (the last step unless the scenario
//	           says otherwise) until the fleet is balanced for good: every
//	           partition has exactly one live handler and every member holds
//	           floor(P/N) or ceil(P/N); taken as the later of the last
//	           unbalanced sample and the last handler start/stop. "never":
//	           not balanced at the end.
//	owned      from the measured step until the end of the last period of
//	           GapThreshold (1 s) or more during which some partition had no
//	           live handler (shorter gaps are handoffs). "never": still
//	           unowned at the end.
//	unowned-s  partition-seconds without a live handler (handoffs included).
//	moves      handler starts; min is what an ideal policy (always balanced,
//	           fewest moves) needs for the same steps; ratio = moves/min.
//	reads/s, writes/s   store operations per second, whole fleet; a list or
//	           snapshot is one read, rows/s counts the records it returned;
//	           checkpoints are counted apart (every policy makes the same).
//	           For herd a read of the log (Changes) is a read too (counted
//	           apart in Ops.LogReads), and its rows are the snapshots'
//	           sessions, partitions and records and the log's entries.
//	server     seconds of one store server's time per second, whole fleet
//	           (1.000 is one Redis core fully busy; more is more than one
//	           core can serve): each operation charged the service time of
//	           faultstore.RedisCost (calibrated on Redis 7.0.15 with INFO
//	           commandstats; see its comment), checkpoints included.
//	steady/member       (reads+writes)/s per member while balanced and idle.
//	double-s   partition-seconds with two or more live handlers.
//	peak-imb   largest (most - least) partitions among running members.
//	violations breaches of the invariants below (warm-up breaches are kept
//	           apart in Result.WarmupViolations).
//
// Large runs run alone and also report their cost to the process (Cost):
// CPU time in all and per member per minute; from the measured step until
// balanced again, CPU, bytes allocated and store reads per member; live
// heap per member at the end and the peak heap per member. For herd this is
// the cost of 1,000 real members, their store and their handlers in one
// process; ProbeReconcile measures one member alone (the command's -large
// prints both).
//
// A handler is live while its member runs and is not paused. Samples are
// taken every 100 ms of virtual time; handler transitions and checkpoints
// are checked exactly, as they happen.
//
// # Invariants (check.go)
//
//	exclusive             never two live handlers for one partition (under
//	                      default settings). Exception, counted as
//	                      resume-overlap: less than ResumeGrace (1 s)
//	                      right after a paused member resumes - no lease can
//	                      stop a stopped process from running for a moment
//	                      when it continues; fencing must keep its writes out.
//	failover              a partition without a live handler is owned again
//	                      within Policy.FailoverBound of the start of the gap,
//	                      or of the last fault if the gap began before it.
//	fair-spread           at the end, floor/ceil shares, each partition once.
//	checkpoint-monotonic  accepted checkpoints never go backwards.
//	fenced-write          no checkpoint accepted under an epoch older than
//	                      the newest one granted.
//
// TestCheckerCatchesInjectedBugs runs a correct test policy and four
// deliberately broken versions of it (a partition given to two members, a
// new owner restarting behind the last checkpoint, an old owner's write
// accepted, a crashed member's partitions never reassigned) and requires the
// checker to name each breach.
//
// # Models and their constants
//
// EventHubs (eventhubs.go; eh-balanced, eh-greedy): the azeventhubs
// Processor load balancer - cycle 10 s jittered to 8-13 s, ownership expires
// 60 s after its last write (judged on the processor's wall clock), an owner
// that owns nothing is invisible, balanced claims one partition per cycle,
// greedy all it needs, unowned first then random steals from owners above
// the maximum, a stolen partition runs on its old owner until that owner's
// next cycle, release only at shutdown, unfenced checkpoints.
//
// KCL (kcl.go; kcl-2.x): the Kinesis Client Library 2.x lease coordinator -
// failoverTimeMillis 10 s, renewal of every lease every 3.3 s, a taker every
// 20 s that scans all leases and takes expired ones up to ceil(leases /
// workers), else steals at most 1 (maxLeasesToStealAtOneTime) from the most
// loaded worker and never when short by only one; leases are not released at
// shutdown; a worker drops a lease it could not renew for 10 s; fenced
// checkpoints.
//
// Seed001 (seed001.go; seed001-redis): the Redis algorithm of seeds/001 -
// one grab race per partition per normal lease time (60 s), every node
// answers after (held +- 0.5) x 250 ms, the winner waits for the loser's
// "allocated" or the maximum shutdown time (30 s); values the seed does not
// give (maximum lease 180 s, minimum grab 30 s, maximum shutdown 30 s) are
// chosen within its constraints. It follows the text literally: "held" is
// the partitions a node processes, so a node waiting to take over keeps
// winning races, and with ~100 partitions per node the answer delays exceed
// the minimum grab time - which is why it degrades badly at scale.
//
// The store server. Herd's members share one modelled server
// (faultstore.Server): each call waits for the calls before it and for its
// own service time, so a fleet that asks more than one Redis core can serve
// sees its calls queue, and its times show it. The models are charged the
// same service times in the server column (a write: a call and a record
// written; a list: a call and a record per row; a checkpoint), but their
// timings are their own documented cycles: they do not wait for the server.
//
// # The load study (load*.go)
//
// Apart from the scenarios above, RunLoadStudy (go -C sim run
// ./cmd/herdsim -load) compares herd's load-aware balance
// (balance.Assigner.AssignLoad) with a model of KCL 3.x's variance-based
// assignment on partitions of Zipf-distributed load: no store and no
// member processes, only reports of the loads (every ReportEvery, with
// optional noise), plans and moves, in steps of one second. LoadSample
// defines the band, LoadCriteria the criteria; docs/simulation.md has the
// output.
//
// Assumptions common to the models: store latency 2 ms per operation
// (scenarios may change it); a CPU-starved member runs each of its callbacks
// late by an exponentially distributed lag with mean 2 s (RunOptions.SlowLag)
// - the thread-pool starvation of the seed's author; handlers checkpoint every
// 10 s. A restarted process is a new owner identity. Limits: a list is one
// operation whatever its size; KCL shard sync and Event Hubs partition
// discovery are immediate.
package sim
