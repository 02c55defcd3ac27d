package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
)

// herd __bench-member is one member of herd bench's fleet, in a process of
// its own: it joins with a handler that does nothing and reports to the
// bench on stdout, one JSON object per line (memberReport). It leaves
// gracefully on SIGTERM, SIGINT or the end of its stdin (the bench is
// gone), and reports once more before it exits.

// memberReport is one line a bench member writes.
type memberReport struct {
	Event string `json:"ev"` // joined, own, counts, error, exit
	At    int64  `json:"at"` // Unix nanoseconds when the line was written
	// own: handler starts and stops in the order they happened (Own: p for
	// a start of partition p, of a numbered set; -p-1 for a stop), each
	// with its time in microseconds after At0 (OwnT).
	At0  int64   `json:"at0,omitempty"`
	Own  []int32 `json:"own,omitempty"`
	OwnT []int64 `json:"ownt,omitempty"`
	// counts (and exit): the member's store operations so far.
	Counts *memberCounts `json:"counts,omitempty"`
	Runs   []jobRun      `json:"runs,omitempty"` // runs: a jobs member's runs
	Error  string        `json:"error,omitempty"`
}

// memberCounts are a member's store operations since it started.
type memberCounts struct {
	FullReads   int64 `json:"full_reads"`   // reads of the whole group (Snapshot)
	RecordReads int64 `json:"record_reads"` // reads of some partitions' records
	LogReads    int64 `json:"log_reads"`
	Writes      int64 `json:"writes"` // renewals included
	Renewals    int64 `json:"renewals"`
	Rows        int64 `json:"rows"`         // records and log entries read
	LastReadAt  int64 `json:"last_read_at"` // Unix ns of the last read that returned rows
	// A jobs member's: checkpoint writes, and keys it owns.
	Checkpoints int64 `json:"checkpoints,omitempty"`
	Owned       int64 `json:"owned,omitempty"`
	LoadReports int64 `json:"load_reports,omitempty"` // ReportLoads calls
	// Log reads that brought load reports only, and the load reports read
	// and their bytes (benchloadcost.go).
	LoadOnlyReads int64 `json:"load_only_reads,omitempty"`
	LoadsRead     int64 `json:"loads_read,omitempty"`
	LoadBytesRead int64 `json:"load_bytes_read,omitempty"`
	LoadValues    int64 `json:"load_values_read,omitempty"` // loads in the reports read
}

func (c memberCounts) ops() int64 { return c.FullReads + c.RecordReads + c.LogReads + c.Writes }

// Timings of a member's reports: handler changes are sent at most
// ownFlushDelay after they happen, counts every countsEvery when they changed.
const (
	ownFlushDelay = 10 * time.Millisecond
	countsEvery   = 100 * time.Millisecond
)

func benchMemberCmd() *cobra.Command {
	var storeURL, group, member, profile string
	var ttl, jobsEvery, leaveIn time.Duration
	var partitions, jobsKeys int
	var sk skewOpts
	var tie memberFlags
	cmd := &cobra.Command{
		Use:    "__bench-member",
		Short:  "One member of herd bench's fleet (started by herd bench)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			go func() { // the bench gone (stdin closed) is a SIGTERM
				io.Copy(io.Discard, os.Stdin) //nolint:errcheck // any end is the end
				stop()
			}()
			if profile != "" {
				stopProfile, err := startCPUProfile(profile)
				if err != nil {
					return err
				}
				defer stopProfile()
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			r := &reporter{enc: json.NewEncoder(w), w: w}
			if err := checkTie(tie.tie); err != nil {
				return err
			}
			conn, err := newConnector(storeURL)
			if err != nil {
				return err
			}
			sk.tie = tie.tieSession(conn.scheme)
			if jobsEvery > 0 {
				return runBenchJobsMember(ctx, r, storeURL, group, member, ttl, jobsEvery, jobsKeys, leaveIn)
			}
			return runBenchMember(ctx, r, storeURL, group, member, ttl, partitions, leaveIn, sk)
		},
	}
	cmd.Flags().StringVar(&storeURL, "store", "", "store URL")
	cmd.Flags().StringVar(&group, "group", "", "group")
	cmd.Flags().StringVar(&member, "member", "", "member id")
	cmd.Flags().StringVar(&profile, "cpuprofile", "", "write this member's CPU profile to FILE")
	cmd.Flags().DurationVar(&ttl, "ttl", herd.DefaultSessionTTL, "session TTL")
	cmd.Flags().IntVar(&partitions, "join-with", 0, "join with this many numbered partitions as the set (0: the stored set)")
	cmd.Flags().DurationVar(&leaveIn, "leave-timeout", leaveTimeout, "how long Leave may take after SIGTERM")
	cmd.Flags().DurationVar(&jobsEvery, "jobs-every", 0, "run a jobs scheduler with this interval instead (0: a member of partitions)")
	cmd.Flags().IntVar(&jobsKeys, "jobs-keys", 0, "the jobs scheduler sets this many keys (0: the stored ones)")
	cmd.Flags().Float64Var(&sk.cores, "burn-cores", 0, "handlers burn this many cores in all, skewed over the partitions (0: they do nothing)")
	cmd.Flags().Float64Var(&sk.skew, "burn-skew", skewExp, "the Zipf exponent of --burn-cores over the partitions")
	cmd.Flags().DurationVar(&sk.vary, "burn-vary", 0, "every other period of this length, handlers burn 1.6 times as much (0: steady)")
	cmd.Flags().StringVar(&tie.tie, "tie-session", "off", "tie the member's session: auto, on or off (herd run's --tie-session)")
	cmd.Flags().DurationVar(&sk.loadEvery, "load-interval", herd.DefaultLoadReportInterval, "Config.LoadReportInterval (0: no reports)")
	return cmd
}

// reporter writes a member's report lines, one at a time.
type reporter struct {
	mu  sync.Mutex
	enc *json.Encoder
	w   *bufio.Writer

	pending memberReport // own changes not yet written
	timer   *time.Timer
	st      *countingStore
	sent    memberCounts
}

func (r *reporter) write(m memberReport) {
	m.At = time.Now().UnixNano()
	r.enc.Encode(m) //nolint:errcheck // the bench being gone is seen on stdin
	r.w.Flush()
}

func (r *reporter) send(m memberReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.write(m)
}

// changed records a handler start (add) or stop of partition p.
func (r *reporter) changed(p int32, add bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now().UnixNano()
	if r.pending.At0 == 0 {
		r.pending.At0 = now
		r.timer.Reset(ownFlushDelay)
	}
	off := (now - r.pending.At0) / 1000
	if !add {
		p = -p - 1
	}
	r.pending.Own, r.pending.OwnT = append(r.pending.Own, p), append(r.pending.OwnT, off)
}

func (r *reporter) flushOwn() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending.At0 == 0 {
		return
	}
	m := r.pending
	m.Event = "own"
	r.pending = memberReport{}
	r.write(m)
}

// counts writes the store counts if they changed (or always, if force).
func (r *reporter) counts(force bool, event string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.st.counts()
	if c == r.sent && !force {
		return
	}
	r.sent = c
	r.write(memberReport{Event: event, Counts: &c})
}

// fail reports err to the bench and returns it.
func (r *reporter) fail(err error) error {
	r.send(memberReport{Event: "error", Error: err.Error()})
	return err
}

// openStore opens the member's store, counted (r.st), and returns what
// closes it; a failure is reported to the bench.
func (r *reporter) openStore(ctx context.Context, storeURL string) (closeStore func(), err error) {
	conn, err := newConnector(storeURL)
	if err != nil {
		return nil, r.fail(err)
	}
	raw, err := conn.connect(ctx)
	if err != nil {
		return nil, r.fail(err)
	}
	fs := faultstore.Wrap(raw)
	r.st = &countingStore{Store: fs, fault: fs}
	r.st.tied, _ = raw.(store.ConnTied)
	return func() { raw.Close() }, nil
}

// runBenchMember runs a member of partitions until ctx ends (a signal, or
// the bench gone), then leaves.
// skewOpts are a bench member's flags of the skewed scenario.
type skewOpts struct {
	cores, skew float64
	loadEvery   time.Duration
	vary        time.Duration // every other period of vary, burn 1.6 times as much
	tie         bool          // Config.TieSession (not a skew option: the member's options travel here)
}

func runBenchMember(ctx context.Context, r *reporter, storeURL, group, id string, ttl time.Duration, partitions int, leaveIn time.Duration, sk skewOpts) error {
	r.timer = time.AfterFunc(time.Hour, r.flushOwn)
	r.timer.Stop()
	fail := r.fail
	closeStore, err := r.openStore(ctx, storeURL)
	if err != nil {
		return err
	}
	defer closeStore()
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("HERD_LOG_LEVEL") == "info" { // herd bench --member-logs
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	var loads []float64 // the skewed scenario's: cores per partition
	cfg := herd.Config{Group: group, Member: id, SessionTTL: ttl, Logger: logger, LoadReportInterval: sk.loadEvery, TieSession: sk.tie,
		Handler: func(c *herd.Claim) error {
			p, err := strconv.Atoi(c.Partition)
			if err != nil {
				return fmt.Errorf("bench member: partition %q is not a number", c.Partition)
			}
			r.changed(int32(p), true)
			if p < len(loads) {
				burn(c, loads[p], sk.vary)
			}
			<-c.Context().Done()
			r.changed(int32(p), false)
			return nil
		}}
	if sk.loadEvery == 0 {
		cfg.LoadReportInterval = -1
	}
	if sk.cores > 0 {
		n := partitions
		if n == 0 {
			snap, err := r.st.Snapshot(ctx, group)
			if err != nil {
				return fail(err)
			}
			n = len(snap.Partitions)
		}
		loads = zipfCores(n, sk.cores, sk.skew)
	}
	if partitions > 0 {
		cfg.Partitions = herd.Numbered(partitions)
	}
	mctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := joinUntil(ctx, mctx, r.st, cfg)
	if err != nil && ctx.Err() != nil {
		return nil // told to stop before it joined: nothing to leave
	}
	if err != nil {
		return fail(err)
	}
	r.send(memberReport{Event: "joined"})
	tick := time.NewTicker(countsEvery)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-tick.C:
			r.counts(false, "counts")
		case <-m.Done():
			return fail(fmt.Errorf("member stopped: %w", m.Err()))
		case <-ctx.Done():
		}
	}
	lctx, lcancel := context.WithTimeout(context.Background(), leaveIn)
	defer lcancel()
	lerr := m.Leave(lctx)
	cancel()
	<-m.Done()
	r.flushOwn()
	r.counts(true, "exit")
	return lerr
}

// joinUntil joins for the member's lifetime mctx; a signal (ctx) before
// the join is done ends the join.
func joinUntil(ctx, mctx context.Context, st store.Store, cfg herd.Config) (*herd.Member, error) {
	jctx, cancel := context.WithCancel(mctx)
	stopJoin := context.AfterFunc(ctx, cancel)
	m, err := herd.Join(jctx, st, cfg)
	if !stopJoin() || err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	context.AfterFunc(mctx, cancel) // jctx ends with the member's lifetime
	return m, nil
}

// countingStore counts a member's store operations (through faultstore,
// which injects no fault here), its renewals, and when it last read rows.
type countingStore struct {
	store.Store
	fault       *faultstore.Store
	tied        store.ConnTied // the store's ties, if it has them (nil: none)
	renewals    atomic.Int64
	snapshots   atomic.Int64 // faultstore counts them with Records as reads
	lastReadAt  atomic.Int64
	checkpoints atomic.Int64
	owned       atomic.Int64 // set by a jobs member before it reports
	loadReports atomic.Int64
	loadOnly    atomic.Int64 // log reads of load reports only
	loadsRead   atomic.Int64
	loadBytes   atomic.Int64
	loadValues  atomic.Int64
}

func (s *countingStore) counts() memberCounts {
	o := s.fault.Ops()
	full := s.snapshots.Load()
	return memberCounts{FullReads: full, RecordReads: o.Reads - full, LogReads: o.Feeds, Writes: o.Writes, Renewals: s.renewals.Load(), Rows: o.Rows, LastReadAt: s.lastReadAt.Load(),
		Checkpoints: s.checkpoints.Load(), Owned: s.owned.Load(), LoadReports: s.loadReports.Load(),
		LoadOnlyReads: s.loadOnly.Load(), LoadsRead: s.loadsRead.Load(), LoadBytesRead: s.loadBytes.Load(), LoadValues: s.loadValues.Load()}
}

// TieSession ties on the store underneath (faultstore does not pass ties
// through).
func (s *countingStore) TieSession(ctx context.Context, group, session string, cfg store.TieConfig) (store.Tie, error) {
	if s.tied == nil {
		return nil, fmt.Errorf("bench member: the store cannot tie sessions: %w", errors.ErrUnsupported)
	}
	return s.tied.TieSession(ctx, group, session, cfg)
}

func (s *countingStore) ReportLoads(ctx context.Context, group, session string, loads []store.Load) error {
	s.loadReports.Add(1)
	return s.Store.ReportLoads(ctx, group, session, loads)
}

func (s *countingStore) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	s.checkpoints.Add(1)
	return s.Store.Checkpoint(ctx, group, partition, epoch, value)
}

func (s *countingStore) KeepAlive(ctx context.Context, group, session string, ttl time.Duration) (time.Duration, error) {
	s.renewals.Add(1)
	return s.Store.KeepAlive(ctx, group, session, ttl)
}

func (s *countingStore) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	s.snapshots.Add(1)
	snap, err := s.Store.Snapshot(ctx, group)
	if err == nil {
		s.lastReadAt.Store(time.Now().UnixNano())
	}
	return snap, err
}
