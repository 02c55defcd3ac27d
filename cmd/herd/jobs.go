package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/child"
	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
)

type jobsOpts struct {
	storeURL      string
	group         string
	member        string
	keys          string
	every         time.Duration
	cron          string
	noSpread      bool
	spread        bool
	clockSkew     time.Duration
	maxConcurrent int
	timeout       time.Duration
	retryDelay    time.Duration
	retryMax      time.Duration
	ttl           time.Duration
	maxShutdown   time.Duration
	metrics       string
	loadEvery     time.Duration // --load-interval: how often the keys' loads (their runs' CPU) are published; 0: never
	logger        *slog.Logger
	args          []string
	join          memberFlags // --join-timeout, --replace-keys
}

// Limits of herd jobs' flags.
const (
	minJobsEvery      = time.Second
	maxJobsEvery      = 366 * 24 * time.Hour
	maxJobsParallel   = 10_000
	maxJobsRunTimeout = 7 * 24 * time.Hour
)

const jobsLong = `jobs joins a jobs group as a member and runs COMMAND once per key and per
slot, for the keys it owns: every --every (slots are multiples of it since
the Unix epoch, UTC), or on a --cron schedule (five fields, UTC unless it
starts with CRON_TZ=Zone). With --every, spread is on by default: each key
runs at an offset into the interval, whole seconds given by a hash of the
key, so that keys are spread over it (--no-spread: all at its start). A
--cron expression runs at the times it names (--spread: spread over the
time to its next time, as --every is). In a zone with daylight saving time
a cron job at a fixed time runs once on the days the clocks change (the
repeated hour collapsed; a time in the skipped hour run at the change).
Keys are spread evenly over the members of the group, by the CPU time of
their runs once it differs clearly (a key's load: a run's CPU seconds over
the schedule's period, published every --load-interval); when a member
joins, leaves or crashes, its keys move. Without --store, the members
meet in herd.db, an SQLite file in the working directory (the members of one
host); give --store for members on several hosts.

In the arguments, {key}, {slot} (the due time, RFC 3339 UTC, the same
value herd status shows for the run's slot), {epoch} and
{attempt} are replaced. The child's environment also holds HERD_KEY,
HERD_SLOT, HERD_EPOCH (the owner's fencing token for the key), HERD_ATTEMPT
(1, more for a retry or a takeover), HERD_MISSED (slots skipped just before
this one), HERD_GROUP and HERD_MEMBER. Its stdin is /dev/null; each line of
its output is prefixed with [key].

The exit status is the run's result: 0 is success; anything else is a
failure, kept on the key's record and retried after --retry-delay (doubled
per failure up to --retry-max), unless the next slot comes first.

Every run is recorded in the store: before it starts ("running", fenced by
the epoch: a member that lost the key does not start it) and after it ends.
If a member crashes during a run, the member that takes the key over runs
that slot again at once, within --ttl. If the fleet was down and slots
were missed, each key runs once and the record counts the skipped slots.

--keys sets the group's keys: ids and ranges separated by commas
(city-1,city-2, 0-99) or @file with one key per line. Without it the
member follows the keys already stored.

Stopping. When a key moves (a member joined, or this one leaves) during a
run, the child's process group gets SIGTERM, then SIGKILL after
--max-shutdown; the next owner runs the slot again. When the member cannot
renew its session it kills its children at once. No child outlives herd
jobs, even when it is killed with SIGKILL (Linux). On SIGINT or SIGTERM the
member leaves gracefully; a second signal kills the children at once.`

func jobsCmd() *cobra.Command { return jobsCmdFor(&jobsOpts{}) }

// jobsCmdFor is the jobs command, its flags parsed into o.
func jobsCmdFor(o *jobsOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs --store URL --group G (--every D | --cron EXPR) [--keys SPEC] -- COMMAND [ARGS...]",
		Short: "Be a member: run COMMAND once per key per interval, for the keys it owns",
		Long:  jobsLong,
		Example: `  # aggregate each city every 8 hours, on whichever member owns it
  herd jobs --store redis://127.0.0.1:6379 --group aggregate --every 8h \
    --keys westlafcals,networksierra,localist,aroundfred -- ./aggregate --city {key}

  # tenants from a file, at 06:00 Paris time, 4 runs at most at once per member
  herd jobs --store redis://127.0.0.1:6379 --group reports --keys @tenants.txt \
    --cron 'CRON_TZ=Europe/Paris 0 6 * * *' --max-concurrent 4 --timeout 30m \
    -- sh -c 'report "$HERD_KEY" --as-of "$HERD_SLOT"'

  # another member of the same group follows the keys already stored
  herd jobs --store redis://127.0.0.1:6379 --group aggregate --every 8h -- ./aggregate --city {key}`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			o.logger = logger(cmd)
			return runJobs(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), *o)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // everything after COMMAND is the command's
	f.StringVar(&o.storeURL, "store", defaultRunStore, "store URL: sqlite://PATH (a file shared by the members of one host; the default is herd.db in the working directory), redis://host:port[/db][?prefix=herd], postgres://host/db[?schema=herd] or etcd://host:2379")
	f.StringVar(&o.group, "group", "", "the jobs group to join (required)")
	f.StringVar(&o.member, "member", "", "this member's id (default host-pid)")
	f.StringVar(&o.keys, "keys", "", "the group's keys: a,b,c, 0-99, combined, or @file (default: the keys stored)")
	f.DurationVar(&o.every, "every", 0, "run each key once per interval, "+minJobsEvery.String()+" to 366 days (or --cron)")
	f.StringVar(&o.cron, "cron", "", "run each key on a cron schedule: 5 fields, UTC unless CRON_TZ=Zone comes first (or --every)")
	f.BoolVar(&o.noSpread, "no-spread", false, "with --every: run every key at the start of each interval instead of spread over it by a hash of the key (spread is the default for --every)")
	f.BoolVar(&o.spread, "spread", false, "with --cron: spread the keys over the time from one of its times to the next, by a hash of the key (by default a cron expression runs at the times it names)")
	f.DurationVar(&o.clockSkew, "clock-skew", jobs.DefaultClockSkew, "how far ahead of this member's clock a key's record may place its slot before it is taken for a clock that was ahead and ignored (logged, counted), 1s to 24h")
	f.IntVar(&o.maxConcurrent, "max-concurrent", jobs.DefaultMaxConcurrent, "runs under way at once on this member, 1 to "+commas(maxJobsParallel))
	f.DurationVar(&o.timeout, "timeout", 0, "stop a run (SIGTERM, then SIGKILL after --max-shutdown) after this long and count it failed; 0: no limit")
	f.DurationVar(&o.retryDelay, "retry-delay", jobs.DefaultRetryDelay, "pause before a failed run is tried again, 1ms to 1h")
	f.DurationVar(&o.retryMax, "retry-max", jobs.DefaultRetryMax, "the longest pause between tries, --retry-delay to 24h")
	f.DurationVar(&o.ttl, "ttl", herd.DefaultSessionTTL, "session TTL: a crashed member's keys, and its runs, are taken over after it, 10ms to 1h")
	f.DurationVar(&o.maxShutdown, "max-shutdown", 30*time.Second, "time a child gets after SIGTERM before SIGKILL, 0 to 1h")
	f.StringVar(&o.metrics, "metrics", "", metricsFlagUsage)
	f.DurationVar(&o.loadEvery, "load-interval", herd.DefaultLoadReportInterval, "how often the member publishes its keys' loads (the CPU time of each key's runs per second of its schedule), 1s to 1h; 0: never (the keys are balanced by count unless other members publish loads)")
	o.join.add(f, "keys")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

// validate checks every flag and argument of jobs, and returns the store's
// connector and the keys (nil: follow the stored ones).
func (o jobsOpts) validate() (*connector, []string, error) {
	if err := store.ValidateID("group", o.group); err != nil {
		return nil, nil, fmt.Errorf("--group: %w", err)
	}
	if o.member != "" {
		if err := store.ValidateID("member", o.member); err != nil {
			return nil, nil, fmt.Errorf("--member: %w", err)
		}
	}
	switch {
	case o.every != 0 && o.cron != "":
		return nil, nil, errors.New("--every and --cron are both set; give one")
	case o.every == 0 && o.cron == "":
		return nil, nil, errors.New("no schedule: give --every (an interval, such as 8h) or --cron (an expression, such as '0 6 * * *')")
	case o.every != 0:
		if err := checkDuration("every", o.every, minJobsEvery, maxJobsEvery); err != nil {
			return nil, nil, err
		}
		if o.spread {
			return nil, nil, errors.New("--spread is for --cron: --every is spread by default (--no-spread turns it off)")
		}
	default:
		if o.noSpread {
			return nil, nil, errors.New("--no-spread is for --every: a --cron expression runs at the times it names unless --spread is given")
		}
		if _, err := jobs.ParseCron(o.cron); err != nil {
			return nil, nil, fmt.Errorf("--cron: %w", err)
		}
	}
	if err := checkInt("max-concurrent", o.maxConcurrent, 1, maxJobsParallel); err != nil {
		return nil, nil, err
	}
	if err := checkDuration("timeout", o.timeout, 0, maxJobsRunTimeout); err != nil {
		return nil, nil, err
	}
	if err := checkDuration("retry-delay", o.retryDelay, time.Millisecond, time.Hour); err != nil {
		return nil, nil, err
	}
	if err := checkDuration("retry-max", o.retryMax, o.retryDelay, 24*time.Hour); err != nil {
		return nil, nil, err
	}
	if err := checkDuration("clock-skew", o.clockSkew, time.Second, 24*time.Hour); err != nil {
		return nil, nil, err
	}
	if err := checkTTL(o.ttl); err != nil {
		return nil, nil, err
	}
	if err := checkDuration("max-shutdown", o.maxShutdown, 0, time.Hour); err != nil {
		return nil, nil, err
	}
	if o.metrics != "" {
		if _, err := metricsAddr(o.metrics); err != nil {
			return nil, nil, err
		}
	}
	if o.loadEvery != 0 {
		if err := checkDuration("load-interval", o.loadEvery, time.Second, time.Hour); err != nil {
			return nil, nil, err
		}
	}
	if len(o.args) == 0 || o.args[0] == "" {
		return nil, nil, errors.New("no command: write herd jobs [flags] -- COMMAND [ARGS...]")
	}
	var keys []string
	if o.keys != "" {
		ps, err := parseIDSpec("--keys", "key", o.keys)
		if err != nil {
			return nil, nil, err
		}
		if len(ps) == 0 {
			return nil, nil, fmt.Errorf("--keys %s: no key", o.keys)
		}
		for _, p := range ps {
			keys = append(keys, p.ID)
		}
	}
	conn, err := newConnector(o.storeURL)
	if err != nil {
		return nil, nil, err
	}
	if conn.mem != nil {
		return nil, nil, withExit(exitUsage, errors.New("--store mem:// is this process's own store: every herd jobs would have a store of its own and run every key; "+
			"give a store the members share: sqlite://PATH (one host; the default is "+defaultRunStore+"), redis://HOST:PORT or postgres://HOST/DB"))
	}
	return conn, keys, nil
}

// jobsRunner runs the children of one herd jobs member.
type jobsRunner struct {
	o      jobsOpts
	shim   []string
	member string
	log    *slog.Logger
	out    io.Writer
	errOut io.Writer
	outMu  sync.Mutex
	errMu  sync.Mutex
	force  chan struct{} // closed on a second signal: kill children at once
	load   jobsLoad      // the keys' CPU loads (jobsload.go)
}

func runJobs(ctx context.Context, out, errOut io.Writer, o jobsOpts) error {
	conn, keys, err := o.validate()
	if err != nil {
		return withExit(exitUsage, err) // a flag's value
	}
	exe, err := shimExecutable()
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(errOut, nil))
	}
	r := &jobsRunner{o: o, shim: []string{exe, "__child"}, log: o.logger, out: out, errOut: errOut, force: make(chan struct{})}
	r.load.init(o.loadEvery, r.log)
	// As in herd run: this handler keeps catching signals after main's
	// first one, so that a second signal forces the stop.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	// The metrics port is bound before the member joins: a port in use
	// must not leave a member that joined (and wrote the keys) and exited.
	var reg *prometheus.Registry
	var health joinedHealth
	if o.metrics != "" {
		reg = newMetricsRegistry()
		ln, err := listenMetrics(ctx, o.metrics)
		if err != nil {
			return err
		}
		_, stop := serveMetricsOn(ctx, ln, reg, health.check, r.log)
		defer stop()
	}
	st, joinLeft, err := connectMember(ctx, conn, o.join, r.log)
	if err != nil {
		return err
	}
	defer st.Close()
	cfg := o.config(st, keys, r.run, r.log)
	cfg.KeepStoredKeys, cfg.JoinTimeout = !o.join.replace, joinLeft
	cfg.TieSession = o.join.tieSession(conn.scheme)
	if reg != nil {
		cfg.Metrics = reg
	}
	life, crash := context.WithCancel(context.WithoutCancel(ctx))
	defer crash()
	s, err := jobs.Start(life, cfg)
	if err != nil {
		return err
	}
	r.member = s.Member().ID()
	health.set(s.Member())
	r.log.Info("joined", "group", o.group, "member", r.member)
	return leaveOnSignal(ctx, sigs, s.Done(), s.Err, s.Leave, crash, r.force, r.log, "jobs")
}

// config is the member's jobs.Config from the flags.
func (o jobsOpts) config(st store.Store, keys []string, run func(context.Context, jobs.Run) error, log *slog.Logger) jobs.Config {
	return jobs.Config{
		Store: st, Group: o.group, Member: o.member, Keys: keys,
		Every: o.every, Cron: o.cron, NoSpread: o.noSpread, Spread: o.spread,
		Run: run, MaxConcurrent: o.maxConcurrent, Timeout: o.timeout,
		RetryDelay: o.retryDelay, RetryMax: o.retryMax,
		SessionTTL: o.ttl, ClockSkew: o.clockSkew,
		// The run kills its child after --max-shutdown; the member's own
		// watchdog only warns, a little later.
		MaxShutdown:        o.maxShutdown + time.Second,
		Logger:             log,
		LoadReportInterval: cmp.Or(o.loadEvery, -1), // 0: no reports
	}
}

// slotText is how herd writes a slot everywhere ({slot}, HERD_SLOT, herd
// status): RFC 3339 in UTC, with a fraction of a second only if the slot
// has one (slots of --every and --cron are whole seconds).
func slotText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// shimExecutable is the children's shim: herd itself. /proc/self/exe still
// runs this binary after it was replaced or deleted on disk.
func shimExecutable() (string, error) {
	exe := "/proc/self/exe"
	if _, err := os.Stat(exe); err != nil {
		if exe, err = os.Executable(); err != nil {
			return "", fmt.Errorf("finding herd's own executable (the children's shim): %w", err)
		}
	}
	return exe, nil
}

// run runs one key's child for one slot: its exit status is the result.
func (j *jobsRunner) run(ctx context.Context, r jobs.Run) error {
	slot := slotText(r.Slot)
	epoch, attempt := strconv.FormatUint(r.Epoch, 10), strconv.Itoa(r.Attempt)
	repl := strings.NewReplacer("{key}", r.Key, "{slot}", slot, "{epoch}", epoch, "{attempt}", attempt)
	args := make([]string, len(j.o.args))
	for i, a := range j.o.args {
		args[i] = repl.Replace(a)
	}
	env := make([]string, 0, len(os.Environ())+8)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HERD_KEY", "HERD_SLOT", "HERD_EPOCH", "HERD_ATTEMPT", "HERD_MISSED", "HERD_GROUP", "HERD_MEMBER":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HERD_KEY="+r.Key, "HERD_SLOT="+slot, "HERD_EPOCH="+epoch, "HERD_ATTEMPT="+attempt,
		"HERD_MISSED="+strconv.FormatUint(r.Missed, 10), "HERD_GROUP="+j.o.group, "HERD_MEMBER="+j.member)
	prefix := "[" + r.Key + "] "
	outs := []*child.Lines{child.NewLines(j.out, &j.outMu, prefix), child.NewLines(j.errOut, &j.errMu, prefix)}
	select {
	case <-j.force:
		return errors.New("not started: herd jobs is being stopped")
	default:
	}
	p, err := child.Start(child.Spec{Shim: j.shim, Args: args, Env: env, Stdout: outs[0], Stderr: outs[1]})
	if err != nil {
		return fmt.Errorf("starting the child: %w", err)
	}
	j.log.Debug("child started", "key", r.Key, "slot", slot, "attempt", r.Attempt, "pid", p.Pid())
	defer j.load.watch(r, p)()
	select {
	case <-p.Done():
	case <-ctx.Done():
		stopChild(j.log, p, j.o.maxShutdown, r.SessionDone(), r.SessionCause, j.force, "key", r.Key)
		flush(outs)
		return fmt.Errorf("stopped (%s): %w", p.Describe(), ctx.Err())
	case <-j.force:
		p.Stop(0)
		flush(outs)
		return errors.New("killed: herd jobs was stopped by a second signal")
	}
	flush(outs)
	j.load.ended(r, p)
	if code, sig := p.Status(); code == 0 && sig == 0 {
		return nil
	}
	return errors.New(p.Describe())
}
