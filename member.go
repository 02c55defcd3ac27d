package herd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// Member is one process taking part in a group. Create it with Join.
//
// Goroutines, each with one owner:
//   - the reconcile loop (owned by Join, waited for by Done) owns all state
//     about sessions and partitions; everything below is started and waited
//     for by it;
//   - one renewal goroutine per session: it only renews and fences, so no
//     handler and no slow reconcile can delay a renewal;
//   - one reader of the group's log, which feeds the replica (feedLoop);
//   - one goroutine per partition being run (the handler, then the release).
type Member struct {
	cfg Config
	st  store.Store
	log *slog.Logger

	runCtx context.Context // cancelled = crash (Join's ctx) or end of Leave
	stop   context.CancelFunc
	// attemptCtx bounds the store calls made between sessions (restores,
	// opening a session): it is cancelled by Leave, so a Leave during an
	// outage does not wait for them.
	attemptCtx  context.Context
	stopAttempt context.CancelFunc

	leaveOnce sync.Once
	leaveCh   chan struct{} // closed by Leave
	done      chan struct{} // closed when every goroutine has returned

	wake     chan struct{} // coalesced "plan again" signal (the replica changed, a slot ended)
	slotDone chan *slot    // a partition's goroutine finished
	errMu    sync.Mutex
	err      error // why the member stopped, for Leave/Err

	// Owned by the reconcile loop: checkpoints to put back after a session
	// loss, and until when partitions without a live owner are left alone
	// (see holdAfterLoss).
	restores    []store.Ownership
	holdFresh   time.Time         // until then, record-less partitions are left alone
	holdFree    time.Time         // until then, every partition without a live owner too
	holdPending bool              // a session was lost: hold once the next one opens
	lossSeen    bool              // since then, the store showed it lost data
	logMark     *store.Version    // where the log must go on from for no hold (see keptData); nil: hold
	lastRecords int               // ownership records in the last snapshot
	lastParts   []store.Partition // the last partition set the store held (possibly emptied)
	// checkedParts: the last partition set plan found sorted (see
	// reconcileBuf.sorted).
	checkedParts []store.Partition
	sessions     map[string]bool // live sessions at the last reconcile
	joinedAt     time.Time       // when a new session was last seen
	endedAt      time.Time       // when plan first saw a session end that no plan has counted yet (zero: none)
	// expireDue is when the earliest session of the group expires unless
	// renewed, as the store last said (zero: unknown); the reconcile loop
	// calls ExpireSessions just after.
	expireDue time.Time

	// Owned by the reconcile loop too: what malformed.go has reported.
	malformed   map[string]bool // malformed records already reported
	corruptSeen string          // the corrupt-group error already reported, "" if none

	step     stepLog // what the current rebalance step changed, for its log line
	incoming int     // partitions the last plan gave this member that others still hold
	// plannedAt is when plan last ran, and planGap the least time until
	// it runs again (see planGap).
	plannedAt time.Time
	planGap   time.Duration

	rep replica // the member's copy of the group, fed by feedLoop
	// aim and aimAt: the target of the plan under way and the version of
	// the copy it was computed on, made the replica's aim by reconcile
	// once the plan is carried out (aim.go).
	aim   *aim
	aimAt store.Version
	// writes counts this member's completed writes that the replica must
	// show before plan may judge them (a session opened, a batch of
	// claims): each is numbered when its call returns, and a read of the
	// group that began after it shows it (replica.base).
	writes atomic.Uint64
	// expireAt carries, from the renewal goroutine to the reconcile loop,
	// when the earliest session of the group expires (KeepAlive's next):
	// the loop calls ExpireSessions just after, so that a crashed member's
	// session ends on time and every replica learns it through the log.
	expireAt chan time.Time

	mu    sync.Mutex
	owned map[string]uint64 // partitions with a running handler -> epoch
	// handlers counts, per partition, the handler goroutines that have not
	// returned, including those cancelled for a handoff or a loss (which
	// owned no longer lists); Leave's timeout error names them.
	handlers map[string]int
	sess     string // current session id, "" if none

	// Records this member released (partition -> epoch) that its replica
	// may still show as its own: plan does not release them again.
	relMu    sync.Mutex
	released map[string]uint64
	rel      *releaser // batches the releases of handed-off slots

	metrics *memberMetrics          // nil without Config.Metrics (metrics.go)
	live    atomic.Pointer[session] // the last session opened, for SessionLive
}

// Errors a member reports.
var (
	// ErrNotOwner is returned by Claim.Checkpoint when the claim's epoch is
	// stale or the member's session has expired.
	ErrNotOwner = store.ErrNotOwner
	// ErrSessionExpired: the member's session is gone from the store.
	ErrSessionExpired = store.ErrSessionExpired
	// ErrFenced: the member cancelled its handlers because it could not renew
	// its session in time.
	ErrFenced = errors.New("herd: session could not be renewed in time; handlers cancelled (self-fenced)")
	// ErrLeft: the member has left the group.
	ErrLeft = errors.New("herd: member has left the group")
)

// Join opens a session for cfg.Member in cfg.Group and starts taking part:
// it claims its share of the partitions and runs cfg.Handler for each. It
// returns once the session is open. A store that is unavailable is retried
// (each attempt to open the session bounded by SessionTTL-FenceMargin)
// until cfg.JoinTimeout; then, or when ctx ends, Join returns the error
// (wrapping store.ErrUnavailable). A group of another kind is refused
// with store.ErrGroupKind (see Config.Kind). Cancelling
// ctx stops the member as a crash would (handlers cancelled, nothing
// released: the session expires after SessionTTL and others take over);
// call Leave to hand over gracefully.
func Join(ctx context.Context, st store.Store, cfg Config) (*Member, error) {
	if err := checkJoinArgs(ctx, st); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	// Every store call of the join is retried while the store is
	// unavailable, until JoinTimeout (join.go).
	joinCtx, joined := context.WithTimeout(ctx, cfg.JoinTimeout)
	defer joined()
	if err := joinPartitionSet(joinCtx, st, cfg); err != nil {
		return nil, fmt.Errorf("herd: join %q: %w", cfg.Group, err)
	}
	runCtx, stop := context.WithCancel(ctx)
	attemptCtx, stopAttempt := context.WithCancel(runCtx)
	m := &Member{
		cfg:         cfg,
		st:          st,
		log:         cfg.Logger.With("group", cfg.Group, "member", cfg.Member),
		runCtx:      runCtx,
		stop:        stop,
		attemptCtx:  attemptCtx,
		stopAttempt: stopAttempt,
		leaveCh:     make(chan struct{}),
		done:        make(chan struct{}),
		wake:        make(chan struct{}, 1),
		slotDone:    make(chan *slot),
		owned:       map[string]uint64{},
		expireAt:    make(chan time.Time, 1),
		released:    map[string]uint64{},
	}
	m.rel = newReleaser(m)
	m.rep.log, m.rep.kick = m.log.Warn, make(chan struct{}, 1)
	if err := m.registerMetrics(); err != nil {
		stop()
		return nil, err
	}
	// The first session may take longer to open than a renewal: it is
	// often the first call on a new connection (on PostgreSQL, one that
	// compiles the store's functions), and nothing waits on it but Join.
	// Up to SessionTTL-FenceMargin the session is of use: its fence time
	// counts from when the call was sent. (With RenewTimeout, a demo with
	// a TTL of 200 ms on PostgreSQL failed to join in 2 of 6 runs under
	// the race detector, and with a TTL of 1 s under .ci/run's load.)
	var sess *session
	err := RetryUnavailable(joinCtx, cfg.Logger, "open session", func(ctx context.Context) error {
		var err error
		sess, err = m.openSession(ctx, max(cfg.RenewTimeout, cfg.SessionTTL-cfg.FenceMargin))
		return err
	})
	if err != nil {
		m.metrics.unregister()
		stop()
		return nil, fmt.Errorf("herd: join %q: %w", cfg.Group, err)
	}
	go m.run(sess)
	return m, nil
}

// Leave hands every partition over gracefully: handlers are cancelled, each
// partition is released as soon as its handler has returned, then the session
// is closed, which wakes the other members at once. It returns when all that
// is done, or with an error if ctx ends first (the member goes on leaving in
// the background; cancel Join's context to abandon it).
func (m *Member) Leave(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("leave")
	}
	m.leaveOnce.Do(func() { close(m.leaveCh); m.stopAttempt() })
	select {
	case <-m.done:
		if err := m.Err(); err != nil && !errors.Is(err, ErrLeft) {
			return err
		}
		return nil
	case <-ctx.Done():
		if waiting := m.handlersRunning(); len(waiting) > 0 {
			return fmt.Errorf("herd: leave %q: handlers have not returned yet (%s): %w",
				m.cfg.Group, listIDs(waiting), ctx.Err())
		}
		return fmt.Errorf("herd: leave %q: every handler has returned; still releasing partitions and closing the session: %w",
			m.cfg.Group, ctx.Err())
	}
}

// handlersRunning lists, sorted, the partitions whose handlers have not
// returned, including those being handed off, which Owned leaves out (and
// Leave hands off all of them).
func (m *Member) handlersRunning() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.handlers))
}

// handlerStarted and handlerReturned keep m.handlers: the partitions whose
// handler goroutines have not returned, whether they still own them or are
// being handed off or dropped.
func (m *Member) handlerStarted(p string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handlers == nil {
		m.handlers = map[string]int{}
	}
	m.handlers[p]++
}

func (m *Member) handlerReturned(p string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handlers[p]--; m.handlers[p] <= 0 {
		delete(m.handlers, p)
	}
}

// Done is closed when the member has stopped (left, or crashed via Join's ctx)
// and every goroutine it started has returned.
func (m *Member) Done() <-chan struct{} { return m.done }

// Err says why the member stopped (ErrLeft after Leave, the context's error
// after a cancellation); nil while running.
func (m *Member) Err() error {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	return m.err
}

// ID is the member id.
func (m *Member) ID() string { return m.cfg.Member }

// Session is the id of the member's current session, "" between sessions.
func (m *Member) Session() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sess
}

// Owned lists, sorted, the partitions this member owns and runs a handler
// for. Those being handed off or dropped are left out from the moment their
// handlers are cancelled (a Leave that times out names those whose handlers
// have not returned).
func (m *Member) Owned() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.owned))
}

// KnownEpoch is the epoch of partition p's ownership record as the
// member's copy of the group shows it (what it has read of the group's
// log), 0 if the copy has no record of p. It costs no store call, and the
// store may already hold a later epoch: it tells a fenced writer which
// epoch superseded its own, it is no fence itself.
func (m *Member) KnownEpoch(p string) uint64 { return m.rep.epochOf(p) }

// SetPartitions replaces the group's partition set for every member.
func (m *Member) SetPartitions(ctx context.Context, ps []store.Partition) error {
	if ctx == nil {
		return errNilContext("set partitions")
	}
	if err := store.ValidatePartitions(ps); err != nil {
		return fmt.Errorf("herd: set partitions: %w", err)
	}
	if _, err := m.st.SetPartitions(ctx, m.cfg.Group, store.PartitionSet{Partitions: ps}); err != nil {
		return fmt.Errorf("herd: set partitions: %w", err)
	}
	m.poke()
	return nil
}

func (m *Member) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Member) setErr(err error) {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	if m.err == nil {
		m.err = err
	}
}
