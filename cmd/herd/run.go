package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/checkpointsock"
	"github.com/herdhq/herd/internal/child"
	"github.com/herdhq/herd/store"
)

type runOpts struct {
	storeURL     string
	group        string
	member       string
	partitions   string
	partsFlag    string // how --partitions was given, for messages ("HERD_PARTITIONS (--partitions)")
	ttl          time.Duration
	maxShutdown  time.Duration
	restartDelay time.Duration
	restartMax   time.Duration
	maxFailures  int           // --max-failures: failures in a row before the partition is given back; 0: never
	loadEvery    time.Duration // --load-interval: how often the children's CPU loads are published; 0: never
	metrics      string        // --metrics ADDR: /metrics and /healthz
	logger       *slog.Logger  // from --log-format and --log-level; nil: text at INFO
	args         []string
	join         memberFlags // --join-timeout, --replace-partitions
}

// defaultRunStore is herd run's store without --store: a database file in
// the working directory, shared by every herd run started there.
const defaultRunStore = "sqlite://herd.db"

const runLong = `run joins a group as a member and runs COMMAND once per partition it owns,
as a child process. In the arguments, {partition} and {epoch} are replaced by
the partition's id and its epoch. The child's environment also holds:

  HERD_PARTITION           the partition's id
  HERD_EPOCH               the epoch of this ownership (a fencing token)
  HERD_CHECKPOINT          the partition's last saved checkpoint, if it is
                           text (valid UTF-8, no NUL byte); unset otherwise
  HERD_CHECKPOINT_BASE64   the same in standard base64, always set
  HERD_SOCKET              the socket of "herd checkpoint"
  HERD_GROUP, HERD_MEMBER  the group and this member's id

A child saves its progress with "herd checkpoint VALUE" (exit status 0:
saved, 3: fenced, the partition has moved on and the child should stop, 1:
error), or by speaking the socket's protocol itself (docs/cli.md, "herd run").

The store is where the members of a group meet. Without --store (or
HERD_STORE) it is the SQLite file herd.db in the working directory: every
herd run of the group started in that directory on this host shares it.
Members on several hosts need a server: --store redis://host:6379.

--partitions sets the group's partition set: ids and ranges separated by
commas (0-31, a,b,c, 0-3,x) or @file with one id per line, if the group has
none. The stored set wins: a member given another joins on the stored one
and logs a warning (so a rolling deploy neither flips the set back and forth
nor crash-loops), unless --replace-partitions. Without --partitions the
member follows the set already stored. A group is of one kind: herd run
refuses a group of herd jobs (exit status 6), and the reverse.
It is a set of ids, never a count: --partitions 32 is one partition named
"32" (herd run warns: did you mean 0-31?), and a single word such as "many"
is one partition of that name (herd run warns too). herd demo and herd
bench take a count, --partition-count.

Stopping. When the partition is handed off (another member joined, or this
one leaves), the child's whole process group gets SIGTERM, then SIGKILL after
--max-shutdown; the partition is released once it is gone. When the member
cannot renew its session in time it kills its children at once with SIGKILL,
on its own monotonic clock, before the store can expire the session. No
child outlives herd run, even when herd run is killed with SIGKILL (Linux: a
parent-death signal kills the child's process group; a process that leaves
the group with setsid escapes).

Restarts. A child that exits on its own is started again after
--restart-delay, doubled after each exit up to --restart-max, with jitter;
a child that ran for --restart-max or longer starts the count afresh.

Giving back. After --max-failures failures in a row (a non-zero exit
status, death by a signal, or a command that cannot be started) the
partition is given back: this member releases it with a mark, and while
this member lives the group places it on another member if there is one
(alone, this member takes it again at once). The mark shows in the
partition's record (herd status). A child that exits 0, or that ran for
--restart-max or longer before it failed, starts the count afresh.
--max-failures 0 never gives back.

On SIGINT or SIGTERM the member hands its partitions off and leaves; a second
signal kills the children at once and exits (the session then expires after
--ttl). Each line of the children's output is prefixed with [partition].`

func runCmd() *cobra.Command {
	o := runOpts{}
	cmd := &cobra.Command{
		Use:   "run [--store URL] --group G [--partitions SPEC] -- COMMAND [ARGS...]",
		Short: "Be a member: run COMMAND once per owned partition",
		Long:  runLong,
		Example: `  # 32 partitions over every "herd run" of group orders started in this
  # directory on this host (they meet in ./herd.db), one consumer each
  herd run --group orders --partitions 0-31 -- ./consumer --partition {partition}

  # the same over several hosts, through Redis
  herd run --store redis://127.0.0.1:6379 --group orders --partitions 0-31 -- ./consumer --partition {partition}

  # a shell child that saves its progress; metrics and health on loopback
  herd run --store redis://127.0.0.1:6379 --group cities --partitions @cities.txt \
    --metrics :9090 -- sh -c 'work "$HERD_PARTITION" && herd checkpoint done'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			o.logger = logger(cmd)
			o.partsFlag = flagName(cmd.Flags(), "partitions")
			return runRun(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // everything after COMMAND is the command's
	f.StringVar(&o.storeURL, "store", defaultRunStore, "store URL: sqlite://PATH (a file shared by the members of one host; the default is herd.db in the working directory), redis://host:port[/db][?prefix=herd], postgres://host/db[?schema=herd], or mem://")
	f.StringVar(&o.group, "group", "", "the group to join (required)")
	f.StringVar(&o.member, "member", "", "this member's id (default host-pid)")
	f.StringVar(&o.partitions, "partitions", "", "the partition set: 0-31, a,b,c, combined, or @file (default: the set stored)")
	f.DurationVar(&o.ttl, "ttl", herd.DefaultSessionTTL, "session TTL: a crashed member's partitions run elsewhere after it, 10ms to 1h")
	f.DurationVar(&o.maxShutdown, "max-shutdown", 30*time.Second, "time a child gets after SIGTERM before SIGKILL, 0 to 1h")
	f.DurationVar(&o.restartDelay, "restart-delay", time.Second, "pause before a child that exited is started again, 1ms to 1h")
	f.DurationVar(&o.restartMax, "restart-max", time.Minute, "the longest pause between restarts, --restart-delay to 24h")
	f.IntVar(&o.maxFailures, "max-failures", defaultMaxFailures, "failures in a row of a partition's child before the partition is given back to the group, 0 (never) to 1000000")
	f.DurationVar(&o.loadEvery, "load-interval", herd.DefaultLoadReportInterval, "how often the member publishes its children's loads (the CPU time of each child's process group), 1s to 1h; 0: never (the partitions are balanced by count unless other members publish loads)")
	f.StringVar(&o.metrics, "metrics", "", metricsFlagUsage)
	o.join.add(f, "partitions")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

// childShimCmd is the shim each child runs under (see internal/child).
func childShimCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "__child PARENT_PID -- COMMAND [ARGS...]",
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			nameShim()
			os.Exit(child.ShimMain(args))
		},
	}
}

// validate checks every flag and argument of run.
func (o runOpts) validate() (*connector, []store.Partition, error) {
	if err := store.ValidateID("group", o.group); err != nil {
		return nil, nil, fmt.Errorf("--group: %w", err)
	}
	if o.member != "" {
		if err := store.ValidateID("member", o.member); err != nil {
			return nil, nil, fmt.Errorf("--member: %w", err)
		}
	}
	if err := checkTTL(o.ttl); err != nil {
		return nil, nil, err
	}
	if o.metrics != "" {
		if _, err := metricsAddr(o.metrics); err != nil {
			return nil, nil, err
		}
	}
	if err := checkDuration("max-shutdown", o.maxShutdown, 0, time.Hour); err != nil {
		return nil, nil, err
	}
	if err := checkDuration("restart-delay", o.restartDelay, time.Millisecond, time.Hour); err != nil {
		return nil, nil, err
	}
	if err := checkDuration("restart-max", o.restartMax, o.restartDelay, 24*time.Hour); err != nil {
		return nil, nil, err
	}
	if o.loadEvery != 0 {
		if err := checkDuration("load-interval", o.loadEvery, time.Second, time.Hour); err != nil {
			return nil, nil, err
		}
	}
	if o.maxFailures < 0 || o.maxFailures > maxMaxFailures {
		return nil, nil, fmt.Errorf("--max-failures must be between 0 (never give back) and %d (got %d)", maxMaxFailures, o.maxFailures)
	}
	if len(o.args) == 0 || o.args[0] == "" {
		return nil, nil, errors.New("no command: write herd run [flags] -- COMMAND [ARGS...]")
	}
	var ps []store.Partition
	if o.partitions != "" {
		var err error
		if ps, err = parsePartitions(o.partitions); err != nil {
			return nil, nil, err
		}
	}
	conn, err := newConnector(o.storeURL)
	if err != nil {
		return nil, nil, err
	}
	if conn.mem != nil {
		return nil, nil, withExit(exitUsage, errors.New("--store mem:// is this process's own store: every herd run would have a store of its own and run every partition; "+
			"give a store the members share: sqlite://PATH (one host; the default is "+defaultRunStore+"), redis://HOST:PORT or postgres://HOST/DB"))
	}
	return conn, ps, nil
}

// runner is one herd run member: its children and its checkpoint socket.
type runner struct {
	o        runOpts
	group    string
	member   string
	shim     []string
	sock     string
	joined   atomic.Pointer[herd.Member] // set once joined: save reads its copy of the group
	log      *slog.Logger
	out      io.Writer
	errOut   io.Writer
	outMu    sync.Mutex
	errMu    sync.Mutex
	force    chan struct{} // closed on a second signal: kill children at once
	metric   *runMetrics   // nil without --metrics
	cpu      *child.CPU    // the children's CPU time, their partitions' loads (runchild.go); nil: not measured
	cpuEvery time.Duration // how often a child's CPU time is read
	cpuErr   sync.Once     // a failure to read it is logged once

	mu     sync.Mutex
	claims map[string]*herd.Claim // partitions with a child, by id
}

func runRun(ctx context.Context, out, errOut io.Writer, o runOpts) error {
	conn, ps, err := o.validate()
	if err != nil {
		return withExit(exitUsage, err) // a flag's value
	}
	// The shim is herd itself, through /proc/self/exe (an upgrade of the
	// binary on disk while herd run runs does not matter).
	exe, err := shimExecutable()
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(errOut, nil))
	}
	if w := specWarning(o.partsFlag, o.partitions); w != "" {
		o.logger.Warn(w)
	}
	r := &runner{
		o: o, group: o.group, shim: []string{exe, "__child"},
		log: o.logger, out: out, errOut: errOut,
		force: make(chan struct{}), claims: map[string]*herd.Claim{},
	}
	if o.loadEvery > 0 {
		r.cpuEvery = min(cpuPeriod, max(o.loadEvery/2, time.Second))
		r.cpu = child.NewCPU(r.cpuEvery / 2)
	}
	// Signals are counted here too: main's handler cancels ctx on the
	// first and then stops catching them; this one keeps catching them, so
	// a second signal forces the stop instead of killing herd run before
	// its children.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	// Every local resource is taken before the member joins: a port in
	// use, or a socket that cannot be made, must not leave a member that
	// joined (and wrote the partition set) and then exited.
	var reg *prometheus.Registry
	var health joinedHealth
	if o.metrics != "" {
		reg = newMetricsRegistry()
		r.metric = newRunMetrics(o.group)
		if err := reg.Register(r.metric); err != nil {
			return fmt.Errorf("run: metrics: %w", err)
		}
		ln, err := listenMetrics(ctx, o.metrics)
		if err != nil {
			return err
		}
		_, stop := serveMetricsOn(ctx, ln, reg, health.check, r.log)
		defer stop()
	}
	sock, err := checkpointsock.Listen(r.save)
	if err != nil {
		return err
	}
	defer sock.Close()
	r.sock = sock.Path()

	st, joinLeft, err := connectMember(ctx, conn, o.join, r.log)
	if err != nil {
		return err
	}
	defer st.Close()
	cfg := herd.Config{
		Group:      o.group,
		Member:     o.member,
		Partitions: ps,
		// The stored set wins, unless --replace-partitions: a rolling
		// deploy that changes --partitions neither flips the set back and
		// forth nor crash-loops.
		KeepStoredPartitions: !o.join.replace,
		JoinTimeout:          joinLeft,
		Handler:              r.handle,
		SessionTTL:           o.ttl,
		// The handler kills its child after --max-shutdown; the member's
		// own watchdog only warns, a little later.
		MaxShutdown:        o.maxShutdown + time.Second,
		Logger:             r.log,
		LoadReportInterval: o.loadEvery,
		TieSession:         o.join.tieSession(conn.scheme),
	}
	if o.loadEvery == 0 {
		cfg.LoadReportInterval = -1 // no reports
	}
	if reg != nil {
		cfg.Metrics = reg
	}
	life, crash := context.WithCancel(context.WithoutCancel(ctx))
	defer crash()
	m, err := herd.Join(life, st, cfg)
	if err != nil {
		return err
	}
	r.member = m.ID()
	r.joined.Store(m)
	r.metric.joined(m.ID())
	health.set(m)
	r.log.Info("joined", "group", o.group, "member", m.ID(), "socket", r.sock)
	return leaveOnSignal(ctx, sigs, m.Done(), m.Err, m.Leave, crash, r.force, r.log, "run")
}

// Defaults and bounds of --max-failures.
const (
	defaultMaxFailures = 5
	maxMaxFailures     = 1_000_000
)
