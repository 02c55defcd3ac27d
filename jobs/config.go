package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/pause"
	"github.com/herdhq/herd/store"
)

// Defaults.
const (
	DefaultMaxConcurrent = 8
	DefaultRetryDelay    = 10 * time.Second
	DefaultRetryMax      = 10 * time.Minute
	DefaultClockSkew     = time.Minute
)

// Run is one run of a key, as Config.Run gets it.
type Run struct {
	Key string
	// Slot is the due time this run is for; time.Since(Slot) is how late it
	// started.
	Slot time.Time
	// Attempt is 1 for the first run of a slot, and counts up after a
	// failure (retried with back-off), an interruption, or a takeover.
	Attempt int
	// Epoch is the owner's fencing token for the key: it strictly increases
	// with every change of owner. Writes to other systems can be fenced
	// with it ("write only if my epoch >= the stored one"). It is the only
	// fence for them: a process stopped inside Run (or just before its
	// first step) past its TTL resumes in Run while another member runs the
	// key; its context is then cancelled, but a write it sends at once is
	// refused only by such a check.
	Epoch uint64
	// Missed is the number of slots skipped just before this one, which
	// never got a run because this later slot was already due (the fleet was
	// down, or a run took longer than the interval). The run may catch up.
	Missed uint64
	// Takeover is set when the previous owner stopped in the middle of a
	// run of this slot (it crashed or lost the key), so this run repeats it.
	Takeover bool
	// Requested is set for a run made on request (store.RequestRun, the
	// dashboard's "run now"), outside the schedule: Slot is when its
	// owner read the request.
	Requested bool
	// Period is the length of the schedule's period that holds Slot:
	// Every's interval, or for a cron schedule the time from its time at
	// or before Slot to its next (0 if the schedule has none). A run that
	// used c CPU seconds gives its key a load of c / Period (ReportLoad).
	Period time.Duration

	claim *herd.Claim
}

// SessionDone is closed when the member's session under which the run
// started has ended (the member fenced itself, its session expired, or it
// stopped): another member may then run the key as soon as the store
// expires the session, so a run still finishing after its context was
// cancelled for a handoff must stop at once. Nil for a Run made outside a
// Scheduler (a test of a Run function).
func (r Run) SessionDone() <-chan struct{} {
	if r.claim == nil {
		return nil
	}
	return r.claim.SessionDone()
}

// SessionCause says why the run's session ended, nil while it lives.
func (r Run) SessionCause() error {
	if r.claim == nil {
		return nil
	}
	return r.claim.SessionCause()
}

// Config describes a member of a jobs group. The zero value of an optional
// field means its default.
type Config struct {
	// Store is where the group lives. Required.
	Store store.Store
	// Group names the jobs group (a herd group whose partitions are the
	// keys). Required.
	Group string
	// Member is this process's id, shown on the blackboard; default
	// host-pid.
	Member string
	// Weight is this member's capacity relative to others (0 means 1):
	// keys are spread over members in proportion to it.
	Weight int
	// Keys, if not nil, replaces the group's keys when the member starts.
	// If nil the member follows the keys already stored (set by another
	// member, by Scheduler.SetKeys, or by herd jobs --keys).
	Keys []string
	// KeepStoredKeys makes the stored keys win: Keys is stored only if the
	// group holds none, and a member whose Keys differ joins on the stored
	// keys and logs a WARN (herd jobs sets it unless --replace-keys). See
	// herd.Config.KeepStoredPartitions.
	KeepStoredKeys bool
	// JoinTimeout bounds how long Start retries a store that is
	// unavailable (herd.Config.JoinTimeout). Default 1m.
	JoinTimeout time.Duration

	// Every runs each key once per interval: the interval's slots are
	// multiples of Every since the Unix epoch (UTC), spread by key unless
	// NoSpread is set. Exactly one of Every and Cron is required, unless
	// Schedule gives every key its own.
	Every time.Duration
	// Cron runs each key on a cron schedule (see ParseCron), at the times it
	// names: not spread unless Spread is set.
	Cron string
	// Schedule, if set, gives a key its own schedule; a nil result means
	// the key follows Every or Cron. It must return the same schedule for a
	// key on every member. An Every is spread as Config.Every is; any other
	// schedule runs at its times unless Spread is set.
	Schedule func(key string) Schedule
	// NoSpread turns spreading off for interval schedules (Every). By
	// default each key due every interval runs at an offset into each
	// period, a fraction of the period given by a hash of the key (whole
	// seconds for periods of a second or more), the same on every member:
	// keys are spread evenly over the period instead of all being due at its
	// start. With NoSpread every key is due at the schedule's times, and
	// MaxConcurrent decides how fast they start.
	NoSpread bool
	// Spread spreads every schedule, cron expressions included, over the
	// time from one of its times to the next (a key of "0 6 * * *" then
	// runs at some time of the day, the same every day). A cron expression
	// runs at the time it names unless Spread is set.
	Spread bool

	// Run runs one key for one slot. Required. Its context is cancelled
	// when the key is handed off to another member (a member joined, or
	// this one leaves) or lost, at the session's fence time if renewals stop
	// (herd.Claim.FenceTime: it moves with every renewal, so a run may last
	// longer than the TTL), and when Timeout passes; it must then
	// return soon: the key is released, and can run elsewhere, only after it
	// returns. A nil result is success; an error is kept on the record and
	// the slot is retried after RetryDelay (doubled per failure, at most
	// RetryMax), unless the next slot comes first. A panic is an error.
	Run func(ctx context.Context, r Run) error
	// MaxConcurrent bounds the runs of this member under way at once
	// (default 8). Keys that fall due while it is reached wait their turn:
	// a member never starts all its due keys at once.
	MaxConcurrent int
	// Timeout, if positive, bounds one run: its context is cancelled after
	// it, and a run that then returns an error counts as failed.
	Timeout time.Duration
	// RetryDelay is the pause before a failed slot is run again (default
	// 10s), doubled after each failure in a row up to RetryMax (default
	// 10m), less up to half at random.
	RetryDelay time.Duration
	RetryMax   time.Duration

	// ClockSkew is how far ahead of this member's clock a key's record may
	// place its slot before the record is taken for the work of a clock
	// that was ahead (default 1 minute). A record's slot is never
	// legitimately in the future: past this tolerance this member logs it
	// (once per key), counts it (herd_jobs_skewed_records_total) and
	// schedules the key from its own clock, instead of waiting for the
	// record's slot.
	ClockSkew time.Duration

	// SessionTTL is how long the store keeps the member's session after its
	// last renewal: a crashed member's keys, and the runs it had under way,
	// are taken over after it. Default herd.DefaultSessionTTL.
	SessionTTL time.Duration
	// MaxShutdown is how long a run being handed off may take to return
	// before a warning is logged (the key stays owned, and runs nowhere
	// else, until it returns). Default herd.DefaultMaxShutdown.
	MaxShutdown time.Duration
	// LoadReportInterval is how often the member publishes the loads its
	// runs report (Run.ReportLoad; herd jobs reports its children's CPU
	// time), in one store write of the loads that changed by more than
	// 10 % (herd.Config.LoadReportInterval). Default 1 minute; negative:
	// nothing is published. A key whose runs report no load publishes
	// none: while no key of the group has one, keys are balanced by count.
	LoadReportInterval time.Duration
	// TieSession ties the member's session to a lock of its process, on
	// stores that can (herd.Config.TieSession, docs/takeover.md): a member
	// whose process dies is taken over about a second later, not after
	// SessionTTL. Off by default.
	TieSession bool
	// Logger receives the member's logs; default slog.Default().
	Logger *slog.Logger
	// Metrics, if set, receives the member's herd metrics and the jobs
	// metrics (metrics.go), labelled with group and member.
	Metrics prometheus.Registerer

	// gate, if set, pauses the member as if its process were stopped:
	// herdtest.WithJobsGate sets it.
	gate *pause.Gate
	// now, if set, is the member's wall clock (default time.Now): tests
	// step it (export_test.go).
	now func() time.Time
}

// The pause hook (package herdtest's Gate) is set in Config.gate through
// this bridge, so that it is no field of the public Config.
func init() {
	pause.SetJobsGate = func(c *Config, g *pause.Gate) { c.gate = g }
}

// withDefaults returns c with zero optional fields replaced by defaults.
func (c Config) withDefaults() Config {
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = DefaultRetryDelay
	}
	if c.RetryMax == 0 {
		c.RetryMax = max(DefaultRetryMax, c.RetryDelay)
	}
	if c.ClockSkew == 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Limits of Every.
const (
	MinEvery = time.Millisecond
	MaxEvery = 10 * 366 * 24 * time.Hour
)

// validate reports every problem with c (after defaults) and returns the
// default schedule (nil if only Schedule is set).
func (c Config) validate() (Schedule, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Store == nil {
		bad("jobs: config: Store is required")
	} else if v := reflect.ValueOf(c.Store); v.Kind() == reflect.Pointer && v.IsNil() {
		bad("jobs: config: Store is a nil %T (did opening it fail?)", c.Store)
	}
	if c.Run == nil {
		bad("jobs: config: Run is required")
	}
	if c.Keys != nil {
		if len(c.Keys) == 0 {
			bad("jobs: config: Keys is empty, which would remove every key of the group; set it to nil to follow the keys already stored")
		} else if err := store.ValidatePartitions(partitions(c.Keys)); err != nil {
			bad("jobs: config: Keys: %w", err)
		}
	}
	var def Schedule
	switch {
	case c.Spread && c.NoSpread:
		bad("jobs: config: both Spread and NoSpread are set; set one")
	}
	switch {
	case c.Every != 0 && c.Cron != "":
		bad("jobs: config: both Every and Cron are set; set one")
	case c.Every != 0:
		if c.Every < MinEvery || c.Every > MaxEvery {
			bad("jobs: config: Every %v is out of range (%v to %v)", c.Every, MinEvery, MaxEvery)
		}
		def = Every{c.Every}
	case c.Cron != "":
		s, err := ParseCron(c.Cron)
		if err != nil {
			bad("jobs: config: Cron: %w", err)
		}
		def = s
	case c.Schedule == nil:
		bad("jobs: config: no schedule: set Every (an interval) or Cron (an expression)")
	}
	if c.MaxConcurrent < 0 {
		bad("jobs: config: MaxConcurrent %d is negative", c.MaxConcurrent)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Timeout", c.Timeout}, {"RetryDelay", c.RetryDelay}, {"RetryMax", c.RetryMax}, {"SessionTTL", c.SessionTTL}, {"MaxShutdown", c.MaxShutdown}, {"ClockSkew", c.ClockSkew}} {
		if d.v < 0 {
			bad("jobs: config: %s %v is negative", d.name, d.v)
		}
	}
	if c.RetryMax < c.RetryDelay {
		bad("jobs: config: RetryMax %v is below RetryDelay %v", c.RetryMax, c.RetryDelay)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return def, nil
}

// partitions returns keys as a herd partition set, each of weight 1.
func partitions(keys []string) []store.Partition {
	ps := make([]store.Partition, len(keys))
	for i, k := range keys {
		ps[i] = store.Partition{ID: k, Weight: 1}
	}
	return ps
}
