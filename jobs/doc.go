// Package jobs runs recurring jobs over many keys (cities, tenants,
// feeds): each key once per interval, or on a cron schedule, on whichever
// member of a fleet owns it, with a blackboard of what ran where and when.
//
//	s, err := jobs.Start(ctx, jobs.Config{
//		Store: st,
//		Group: "aggregate",
//		Keys:  []string{"westlafcals", "networksierra", "localist", "aroundfred"},
//		Every: 8 * time.Hour,
//		Run: func(ctx context.Context, r jobs.Run) error {
//			return aggregate(ctx, r.Key) // ctx is cancelled if the key moves
//		},
//	})
//	...
//	s.Leave(ctx) // on SIGTERM: hand the keys over
//
// # Design
//
// A jobs group is a herd group whose partitions are the keys. herd spreads
// the keys evenly over the members (in proportion to Config.Weight) and
// keeps them where they are unless the fleet changes, so each key has
// exactly one owner at a time, and a crashed member's keys are taken over
// after its session TTL. The owner of a key runs the key's due slots. The
// key's record (Record: owner, running, slot, last start and stop, result,
// run, failure, takeover and missed counts, next due), JSON with a
// version, is the partition's checkpoint, written with herd's fenced
// Claim.Checkpoint, which the store applies only if the claim's epoch is
// still the key's current one. Each run costs two store writes:
//
//  1. Before the run, the owner writes "running slot S, started T, epoch E"
//     (synchronously, not with Claim.Mark). If the write is refused
//     (ErrNotOwner) the run does not start: a member that lost the key,
//     for instance one that was stopped (SIGSTOP, a VM pause) past its
//     session TTL, never starts a slot another member now owns. If the
//     write fails otherwise, the run does not start either, and is tried
//     again after a short pause. A member stopped after the write was
//     accepted and before Run was called does not start the run either: just
//     before Run the owner checks the session's fence time
//     (herd.Claim.FenceTime) on the monotonic clock, not only the context,
//     whose cancellation comes late after a stop. Run's context ends at the
//     fence time as renewals move it, so a run outlives its session by no
//     more than Run takes to return.
//  2. After the run, the owner writes the stop time, the result or error,
//     the counts and the next due time.
//
// A new owner reads the record from its claim. If the record says
// "running" (every claim has a new epoch, so it is from an older one: its
// owner crashed or lost the key mid-run), the new owner runs that slot
// again at once, as a takeover: within the session TTL of the crash, not
// an interval later. If it says a slot ended, the next slot is due at the
// next time of the key's schedule. If later slots have passed meanwhile
// (the fleet was down for a day, or a run took longer than the interval),
// the key runs once, for the latest due slot, and the record counts the
// skipped slots in Missed. A failed run is retried with a growing back-off
// (Config.RetryDelay, RetryMax) unless the next slot comes first; its error
// stays on the record. A run interrupted by a graceful handoff (a member
// joined, or its owner leaves) writes "interrupted", and the next owner runs
// the slot again at once.
//
// Why this is simpler than a separate table of jobs and locks (the
// blackboard of the seed design, with a lock record per city that a worker
// creates before the run and deletes after, and that others override once
// it is older than the interval): herd already gives each key one owner,
// detects crashes by session TTL, spreads keys fairly and hands them over
// on deploys, and the epoch fences every write. The record needs no lock
// of its own, no expiry of its own, no scan of every key by every member at
// every cycle and no cleanup; there is nothing new in the store contract,
// and two workers can never run one key at once because they both found
// an old lock, which the seed design accepts ("the last writer wins, a
// little extra work gets done"). A stuck run is not mistaken for a dead one
// after one interval either: the owner's session, not the age of the
// record, says whether it is alive.
//
// # Spread and schedules
//
// Slots come from Config.Every (multiples of it since the Unix epoch, UTC),
// Config.Cron (evaluated in UTC unless it starts with CRON_TZ=), or a
// per-key Config.Schedule. A cron expression runs at the times it names.
// An interval is spread by default: each key runs at an offset into each
// period, a fraction of the period given by a hash of the key, in whole
// seconds: 10,000 keys due every hour start about 2.8 a second, not all at
// the top of the hour (Config.NoSpread turns that off; Config.Spread turns
// it on for cron expressions too). Config.MaxConcurrent bounds the runs of
// one member under way at once, so a member never starts all its due keys
// at once either. A key with no record yet runs at its first slot after
// its first owner claimed it; that owner writes the slot into the key's
// record as its next due time, so the blackboard shows it before the
// first run.
//
// # Clocks
//
// Slots are due by the owner's wall clock. A record's slot is never
// legitimately in the future, so a record whose slot is ahead of the
// owner's clock by more than Config.ClockSkew (a minute by default) was
// written by a member whose clock was ahead: the owner logs it once per
// key, counts it (herd_jobs_skewed_records_total) and schedules the key
// from its own clock, instead of leaving the key silent until then.
//
// A step of a member's wall clock moves its keys' due times with it within
// a minute: after a step forward the latest slot now due runs once (the
// skipped ones counted as missed); after a step back the member runs no slot
// early and none of the slots it ran again, each key waiting for the clock
// to reach its next slot. Ownership is not touched by either: sessions
// expire by the store's clock, and fencing uses the monotonic clock.
//
// In a zone with daylight saving time (CRON_TZ=), a cron job at a fixed
// time runs once on the days the clocks change, as in Vixie cron: in autumn
// the repeated hour is collapsed (CRON_TZ=America/New_York 30 1 * * * runs
// at 01:30 EDT, not again at 01:30 EST); in spring a time in the skipped
// hour runs at the change (30 2 * * * runs at 03:00 EDT). A job whose
// minute or hour field starts with * follows real time: it runs in both
// passes through a repeated hour.
//
// # Requests
//
// An operator (herd dashboard --allow-actions) may ask a key's owner to run
// it now, or to pause or resume it, by a request logged in the group
// (store.Store.Request). The owner reads it from the log its member
// follows, and acts under its own epoch: a run on request is made and
// recorded as any run (Run.Requested set); a pause is written into the
// key's record (Record.Paused), so the key's next owner keeps skipping its
// scheduled runs until a request to resume. A request for a key nobody
// owns when it is read is dropped. See request.go.
//
// # What is guaranteed
//
// herd's guarantees (package herd, "What is guaranteed") carry over, with
// keys for partitions. In particular:
//
//   - At most one member runs a key at a time, as long as Run returns when
//     its context is cancelled: the key is released only after the run
//     has returned and its outcome is written, and a crashed owner's key
//     is claimed only after its session expired, by which time the owner
//     has fenced itself and cancelled its runs.
//   - A slot is started only by the key's owner at the time of the
//     "running" write, and every record write of a former owner is refused.
//   - A run that was under way when its owner crashed is run again by the
//     next owner at once after the session TTL.
//
// What is not: a run is at least once per slot, not exactly once (a run
// that finished but whose outcome was not written, because its owner
// crashed or lost the key between the two, is run again); a process
// stopped (SIGSTOP, a VM or GC pause) inside Run, or after the fence check
// and before Run's first step, that resumes after its TTL may go on for a
// moment while the new owner runs the key: no check can close that window,
// so fence writes to other systems with Run.Epoch; and slots are due by
// each member's wall clock, so a member whose clock is off runs its keys
// early or late by as much (never twice at once: ownership is decided by
// the store; see "Clocks" for a record written by a clock far ahead).
package jobs
