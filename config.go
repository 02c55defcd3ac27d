package herd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdhq/herd/balance"
	"github.com/herdhq/herd/internal/pause"
	"github.com/herdhq/herd/internal/reqhook"
	"github.com/herdhq/herd/store"
)

// Default timings: a crashed member's partitions are taken over within
// SessionTTL, and a graceful handoff takes milliseconds.
const (
	DefaultSessionTTL  = 10 * time.Second
	DefaultMaxShutdown = 30 * time.Second
	// DefaultPollInterval: see Config.PollInterval. Besides renewals, a
	// member at rest costs the store one read per interval (0.008 a second).
	DefaultPollInterval = 2 * time.Minute
	// DefaultResyncInterval: see Config.ResyncInterval.
	DefaultResyncInterval = 10 * time.Minute
	DefaultRestartDelay   = time.Second
	DefaultJoinSettle     = 100 * time.Millisecond
	// DefaultCheckpointInterval is how often a value recorded with
	// Claim.Mark is written, like the 5 s auto-commit of Kafka clients.
	DefaultCheckpointInterval = 5 * time.Second
	// DefaultLoadReportInterval: see Config.LoadReportInterval. Reports
	// cost about 0.05 store operations per member per second (docs/loads.md).
	DefaultLoadReportInterval = time.Minute
)

// Handler processes one partition for as long as the member owns it. It must
// return soon after c.Context() is cancelled (the partition is being handed
// off or was lost); it may write a final checkpoint first, as the partition
// is released only after it returns. Progress is recorded with c.Mark
// (cheap, written every Config.CheckpointInterval and before the release) or
// c.Checkpoint (one fenced store write per call).
//
// A handler that returns while the partition is still owned is started again
// after Config.RestartDelay, unless its error wraps ErrGiveBack (then the
// partition is given back for another member to run).
type Handler func(c *Claim) error

// Config describes how a member joins a group. The zero value of every timing
// field means its default; Validate reports unsafe combinations.
type Config struct {
	// Group names the set of partitions shared by the members. Required.
	Group string
	// Member is this process's id, shown in status; default host-pid.
	// Processes may share an id: each join opens its own session.
	Member string
	// Weight is this member's capacity relative to others (0 means 1).
	Weight int
	// Partitions, if not nil, replaces the group's partition set in the store
	// when the member joins (with a WARN if the set it replaces differed).
	// If nil the member follows the stored set (set by another member,
	// Member.SetPartitions or the CLI). Every member runs the stored set.
	Partitions []store.Partition
	// KeepStoredPartitions makes the stored set win: Partitions is stored
	// only if the group holds none, and a member given another set joins on
	// the stored one with a WARN. herd run sets it (unless
	// --replace-partitions), so a rolling deploy never flips the set.
	KeepStoredPartitions bool
	// Kind is the kind of group: store.KindPartitions (the default) or
	// store.KindKeys (package jobs sets it). A group takes the kind of its
	// first member; Join of the other kind fails with store.ErrGroupKind and
	// writes nothing, so two fleets that share a group name cannot take over
	// each other's work.
	Kind string
	// JoinTimeout bounds how long Join retries an unavailable store (errors
	// wrapping store.ErrUnavailable; RetryUnavailable); then Join returns
	// the last error. Default 1m.
	JoinTimeout time.Duration
	// Handler runs once per owned partition. Required.
	Handler Handler

	// SessionTTL is how long the store keeps the member's session after the
	// last renewal; a crashed member's partitions are taken over after it.
	// Default 10s.
	SessionTTL time.Duration
	// RenewInterval is the time between session renewals. Default TTL/3.
	RenewInterval time.Duration
	// RenewTimeout: a renewal attempt out this long gets another attempt
	// beside it (the first goes on until the session would be fenced).
	// Default RenewInterval.
	RenewTimeout time.Duration
	// FenceMargin: if no renewal has succeeded for SessionTTL-FenceMargin
	// since the last successful one was sent (on the monotonic clock), the
	// member cancels all its handlers before the store can expire the
	// session. It must cover the clock-rate error between host and store
	// over one TTL plus the time handlers take to notice. Default TTL/10.
	FenceMargin time.Duration
	// TieSession ties the member's session to a connection of its own where
	// the store can (store.ConnTied: PostgreSQL; SQLite, by a file lock),
	// so that when the process dies (kill -9, OOM, a panic) others take over
	// TieGrace after the store sees the connection closed, not SessionTTL.
	// If it closes while the member lives, the member cancels its handlers
	// at once, as at its fence. Host crashes, network cuts and stalls still
	// end the session by TTL. Off by default; it assumes no
	// transaction-mode pooler and proxy timeouts above 2 s + SessionTTL/4
	// (docs/takeover.md).
	TieSession bool
	// TieGrace is how long after the store sees a tied connection closed
	// the session ends. It must cover what can outlive the member or its
	// tie: on PostgreSQL, a live member noticing and its handlers returning;
	// on SQLite, herd run's children dying with their member (7-25 ms after
	// kill -9, docs/takeover.md). Default FenceMargin/4 (250 ms at the
	// default TTL), at most FenceMargin; raise it where handlers are slow to
	// return or the host stalls for hundreds of milliseconds.
	TieGrace time.Duration
	// MaxShutdown is how long a handler being handed off may take to return
	// before an error is logged; the partition stays owned until it returns,
	// unless ForceHandoff. Default 30s.
	MaxShutdown time.Duration
	// ForceHandoff releases a partition after MaxShutdown even if its
	// handler has not returned: the new owner may run beside it, and the
	// epoch rejects the old handler's checkpoints. Off by default.
	ForceHandoff bool
	// PollInterval is how often a member checks the next store.MaxBatch of
	// its own records (Store.Records) and, while a record of the group is
	// broken by hand (which the group's log cannot show), reads the whole
	// group to notice the repair. Default 2m, or 12 x SessionTTL if shorter.
	PollInterval time.Duration
	// ResyncInterval is the slow backstop: a member reads the whole group
	// this often even if nothing looks broken, so that a record broken by
	// hand cannot keep its plan apart from the others' for longer.
	// Default 10m, or 60 x SessionTTL if shorter.
	ResyncInterval time.Duration
	// JoinSettle: after a member joins, every member waits this long before
	// claiming or handing off, so that members joining together are
	// balanced in one step; leaves and crashes are acted on at once. Before
	// a first placement the wait grows with the spread of the fleet's start
	// to 3 x JoinSettle, or 3 x the longest pause between two sessions
	// opening (at most SessionTTL/10; alone, 3 x JoinSettle). Joins into a
	// placed group that come one after the other (each within SessionTTL/10
	// of the one before) wait 3 x the longest pause between two of them,
	// within [JoinSettle, SessionTTL/10]. After reading the group, a member
	// waits for the log up to as long as the read took (at most 5 x
	// JoinSettle). Default 100ms; negative means no wait.
	JoinSettle time.Duration
	// RestartDelay is the pause before a handler that returned while still
	// owning its partition is started again. Default 1s.
	RestartDelay time.Duration
	// CheckpointInterval is how often the member writes a partition's
	// progress recorded with Claim.Mark (plus once when the handler returns
	// for good): a crash loses at most this much. Default 5s; at least 1ms.
	CheckpointInterval time.Duration
	// LoadReportInterval is how often the member publishes the loads of its
	// partitions (one store write, of the loads that changed by more than
	// 10 %; Claim.ReportLoad says what a load is); members balance by the
	// published loads once they differ. Default 1m; negative: this member
	// publishes nothing (it still balances by the others' loads).
	LoadReportInterval time.Duration
	// LoadBalance is the hysteresis and move budget of the balance by load
	// (balance.Assigner.AssignLoad); the zero value is its defaults. Every
	// member of a group must use the same, to compute the same plan.
	LoadBalance balance.LoadOptions

	// Logger receives the member's logs; default slog.Default().
	Logger *slog.Logger
	// Metrics, if set, receives the member's Prometheus metrics (listed in
	// docs/operators.md), labelled with group and member: registered by
	// Join, unregistered when the member stops. Members of one process that
	// share a registerer need distinct Member ids. Nil: no metrics.
	Metrics prometheus.Registerer

	gate      *pause.Gate         // pauses the member's goroutines while closed, as SIGSTOP would (herdtest.WithGate)
	onRequest func(store.Request) // receives every request the group's log carries (package jobs, via reqhook)
	ownLoads  bool                // loads are only those handlers report, never their marks' rate (jobs, via reqhook)
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.Member == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "member"
		}
		c.Member = host + "-" + strconv.Itoa(os.Getpid())
	}
	if c.Weight == 0 {
		c.Weight = 1
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.SessionTTL, DefaultSessionTTL)
	def(&c.RenewInterval, c.SessionTTL/3)
	def(&c.RenewTimeout, c.RenewInterval)
	def(&c.FenceMargin, c.SessionTTL/10)
	def(&c.TieGrace, c.FenceMargin/4)
	def(&c.MaxShutdown, DefaultMaxShutdown)
	def(&c.PollInterval, min(DefaultPollInterval, 12*c.SessionTTL))
	def(&c.ResyncInterval, min(DefaultResyncInterval, 60*c.SessionTTL))
	def(&c.RestartDelay, DefaultRestartDelay)
	def(&c.JoinSettle, DefaultJoinSettle)
	def(&c.CheckpointInterval, DefaultCheckpointInterval)
	def(&c.LoadReportInterval, DefaultLoadReportInterval)
	def(&c.JoinTimeout, DefaultJoinTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Kind == "" {
		c.Kind = store.KindPartitions
	}
	return c
}

// retryPause is the pause before a failed renewal or session opening is
// tried again, and the longest between two tries of a release.
func (c Config) retryPause() time.Duration { return min(c.RenewInterval/4, 500*time.Millisecond) }

// Validate reports every problem with c (after defaults are applied), joined:
// missing fields, bad ids, or timings that would let a session expire in the
// store before the member notices.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := store.ValidateID("group", c.Group); err != nil {
		bad("config: Group: %w", err)
	}
	if err := store.ValidateID("member", c.Member); err != nil {
		bad("config: Member: %w", err)
	}
	if c.Handler == nil {
		bad("config: Handler is required")
	}
	if c.Weight < 0 {
		bad("config: Weight %d is negative", c.Weight)
	}
	if err := store.ValidateKind(c.Kind); err != nil {
		bad("config: Kind: %w", err)
	}
	if c.Partitions != nil && len(c.Partitions) == 0 {
		bad("config: Partitions is empty, which would remove every partition of the group " +
			"(herd.Numbered(n) returns none for n <= 0); set it to nil to follow the set already stored")
	} else if c.Partitions != nil {
		if err := store.ValidatePartitions(c.Partitions); err != nil {
			bad("config: Partitions: %w", err)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"SessionTTL", c.SessionTTL}, {"RenewInterval", c.RenewInterval}, {"RenewTimeout", c.RenewTimeout},
		{"FenceMargin", c.FenceMargin}, {"MaxShutdown", c.MaxShutdown}, {"PollInterval", c.PollInterval},
		{"ResyncInterval", c.ResyncInterval}, {"JoinTimeout", c.JoinTimeout},
		{"RestartDelay", c.RestartDelay}, {"CheckpointInterval", c.CheckpointInterval}, {"TieGrace", c.TieGrace},
	} {
		if d.v < 0 {
			bad("config: %s %v is negative", d.name, d.v)
		}
	}
	if c.SessionTTL > 0 && c.SessionTTL < 10*time.Millisecond {
		bad("config: SessionTTL %v is below 10ms; store round trips would expire it", c.SessionTTL)
	}
	if c.LoadReportInterval > 0 && c.LoadReportInterval < time.Second {
		bad("config: LoadReportInterval %v is below 1s: each report is a store write by every member (negative turns reports off)", c.LoadReportInterval)
	}
	if c.LoadBalance.MaxMoves < 0 || c.LoadBalance.Band < 0 || c.LoadBalance.Floor < 0 {
		bad("config: LoadBalance %+v has a negative field", c.LoadBalance)
	}
	if c.CheckpointInterval > 0 && c.CheckpointInterval < time.Millisecond {
		bad("config: CheckpointInterval %v is below 1ms; to write on every call, use Claim.Checkpoint", c.CheckpointInterval)
	}
	if c.SessionTTL%time.Millisecond != 0 {
		bad("config: SessionTTL %v must be a whole number of milliseconds", c.SessionTTL)
	}
	// Two renewal attempts must fit before the fence, so that one lost
	// reply does not cancel every handler.
	fenceAt := c.SessionTTL - c.FenceMargin
	if c.FenceMargin >= c.SessionTTL {
		bad("config: FenceMargin %v must be less than SessionTTL %v", c.FenceMargin, c.SessionTTL)
	} else if c.RenewInterval+c.RenewTimeout > fenceAt {
		bad("config: RenewInterval %v + RenewTimeout %v must not exceed SessionTTL-FenceMargin %v, "+
			"or a single failed renewal fences the member (lower RenewInterval, e.g. to SessionTTL/3)",
			c.RenewInterval, c.RenewTimeout, fenceAt)
	}
	if c.RenewTimeout > c.RenewInterval {
		bad("config: RenewTimeout %v must not exceed RenewInterval %v", c.RenewTimeout, c.RenewInterval)
	}
	if c.TieGrace > c.FenceMargin {
		bad("config: TieGrace %v must not exceed FenceMargin %v: it stands for the fence margin when a tied connection closes", c.TieGrace, c.FenceMargin)
	}
	if c.FenceMargin > 0 && c.FenceMargin < c.SessionTTL/100 {
		bad("config: FenceMargin %v is under 1%% of SessionTTL %v: it must cover clock-rate error between host and store", c.FenceMargin, c.SessionTTL)
	}
	return errors.Join(errs...)
}

// checkStoreArgs reports a nil context or store (a typed nil too: a failed
// Open's) given to op.
func checkStoreArgs(op string, ctx context.Context, st store.Store) error {
	if ctx == nil {
		return errNilContext(op)
	}
	if st == nil {
		return fmt.Errorf("herd: %s: the store is nil (open one with memstore.New or redisstore.Open): %w", op, store.ErrInvalid)
	}
	if v := reflect.ValueOf(st); v.Kind() == reflect.Pointer && v.IsNil() {
		return fmt.Errorf("herd: %s: the store is a nil %T (did opening it fail?): %w", op, st, store.ErrInvalid)
	}
	return nil
}

// errNilContext is the error of a public method given a nil context.
func errNilContext(op string) error {
	return fmt.Errorf("herd: %s: the context is nil (use context.Background() or a context with a deadline): %w", op, store.ErrInvalid)
}

// Partition is one unit of work in a group: an id and a weight. The count
// balance counts each partition as one whatever its weight (a member's
// Config.Weight, its capacity, is used); the balance by load, once the
// published loads differ, counts a partition's load Weight times
// (docs/loads.md).
type Partition = store.Partition

// Numbered returns partitions "0" .. "n-1", each of weight 1. For n <= 0 it
// returns an empty, non-nil set, which Config.Validate rejects: an empty
// Config.Partitions would remove every partition of the group.
func Numbered(n int) []Partition {
	ps := make([]Partition, max(n, 0))
	for i := range ps {
		ps[i] = Partition{ID: strconv.Itoa(i), Weight: 1}
	}
	return ps
}

// The hooks of herdtest and jobs set Config's unexported fields through
// these bridges, so that they are no fields of the public Config.
func init() {
	pause.SetHerdGate = func(c *Config, g *pause.Gate) { c.gate = g }
	reqhook.SetHerdHandler = func(c *Config, f func(store.Request)) { c.onRequest = f }
	reqhook.SetHerdOwnLoads = func(c *Config) { c.ownLoads = true }
}
