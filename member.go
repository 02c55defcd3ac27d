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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdhq/herd/internal/loadmeter"
	"github.com/herdhq/herd/internal/membermetrics"
	"github.com/herdhq/herd/store"
)

// Member is one process taking part in a group. Create it with Join.
//
// The reconcile loop (started by Join, waited for by Done) owns the
// sessions and partitions and starts and waits for every other goroutine:
// per session its renewal (which nothing else can delay), load reporter and
// tie watcher; the log reader; the releaser; one per partition run.
type Member struct {
	cfg Config
	st  store.Store
	log *slog.Logger

	runCtx context.Context // cancelled = crash (Join's ctx) or end of Leave
	life   lifecycle       // leaving, stopping, and why the member stopped
	events loopEvents      // what wakes the reconcile loop (loop.go)

	// Owned by the reconcile loop.
	loss    lossState        // after a lost session: holds and restores
	planner plannerState     // what plan keeps from one plan to the next
	reports malformedReports // what malformed.go has reported

	rep    replica       // the member's copy of the group, fed by the log reader
	writes atomic.Uint64 // numbers completed writes (a session opened, a batch of claims); plan waits for the replica to show them

	running runningSet             // the partitions with a running handler, and the session
	rel     *releaser              // batches the releases of handed-off slots; keeps every release (noteReleased)
	metrics *membermetrics.Metrics // nil without Config.Metrics
	meter   *loadmeter.Meter       // the running partitions' loads (loadreport.go); nil if LoadReportInterval < 0
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
// returns once the session is open. An unavailable store is retried (each
// attempt to open the session bounded by SessionTTL-FenceMargin) until
// cfg.JoinTimeout; then, or when ctx ends, Join returns the error (wrapping
// store.ErrUnavailable). A group of another kind is refused with
// store.ErrGroupKind (see Config.Kind). Cancelling ctx stops the member as a
// crash would (handlers cancelled, nothing released: the session expires
// after SessionTTL and others take over); call Leave to hand over gracefully.
func Join(ctx context.Context, st store.Store, cfg Config) (*Member, error) {
	if err := checkStoreArgs("join", ctx, st); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	joinCtx, joined := context.WithTimeout(ctx, cfg.JoinTimeout)
	defer joined()
	if err := joinPartitionSet(joinCtx, st, cfg); err != nil {
		return nil, fmt.Errorf("herd: join %q: %w", cfg.Group, err)
	}
	runCtx, stop := context.WithCancel(ctx)
	attemptCtx, stopAttempt := context.WithCancel(runCtx)
	m := &Member{
		cfg:    cfg,
		st:     st,
		log:    cfg.Logger.With("group", cfg.Group, "member", cfg.Member),
		runCtx: runCtx,
		life: lifecycle{stop: stop, attemptCtx: attemptCtx, stopAttempt: stopAttempt,
			leaveCh: make(chan struct{}), done: make(chan struct{})},
		events:  loopEvents{wake: make(chan struct{}, 1), slotDone: make(chan *slot), expireAt: make(chan time.Time, 1)},
		loss:    lossState{loads: map[string]float64{}},
		running: runningSet{owned: map[string]uint64{}, handlers: map[string]int{}},
	}
	m.rel = &releaser{m: m, wake: make(chan struct{}, 1), released: map[string]uint64{}}
	if cfg.LoadReportInterval > 0 && cfg.ownLoads {
		m.meter = loadmeter.NewOwnOnly(cfg.LoadReportInterval)
	} else if cfg.LoadReportInterval > 0 {
		m.meter = loadmeter.New(cfg.LoadReportInterval)
	}
	m.rep.log, m.rep.wakeFeed, m.rep.burstWait = m.log.Warn, make(chan struct{}, 1), cfg.SessionTTL/10
	if err := m.registerMetrics(); err != nil {
		stop()
		return nil, err
	}
	// A first opening (a new connection's first call) may take until its fence.
	var sess *session
	err := RetryUnavailable(joinCtx, cfg.Logger, "open session", func(ctx context.Context) error {
		var err error
		sess, err = m.openSession(ctx, max(cfg.RenewTimeout, cfg.SessionTTL-cfg.FenceMargin))
		return err
	})
	if err != nil {
		m.metrics.Unregister()
		stop()
		return nil, fmt.Errorf("herd: join %q: %w", cfg.Group, err)
	}
	go m.run(sess)
	return m, nil
}

// registerMetrics registers the member's metrics (internal/membermetrics)
// with Config.Metrics, if set, and counts its store calls from then on.
func (m *Member) registerMetrics() error {
	if m.cfg.Metrics == nil {
		return nil
	}
	mm := membermetrics.New(m.cfg.Group, m.cfg.Member, ErrFenced, membermetrics.Gauges{
		Owned: func() float64 { return float64(m.ownedCount()) },
		Handlers: func() float64 {
			m.running.mu.Lock()
			defer m.running.mu.Unlock()
			return float64(len(m.running.handlers))
		},
		Live: func() float64 {
			if m.SessionLive() {
				return 1
			}
			return 0
		},
		Load: func() float64 {
			if m.meter == nil {
				return 0
			}
			return m.meter.Total()
		},
	})
	if err := mm.Register(m.cfg.Metrics); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			return fmt.Errorf("herd: join %q: metrics: a member %q of this group already has its metrics registered "+
				"with Config.Metrics (give each member of one process its own Config.Member, or its own registerer): %w: %w",
				m.cfg.Group, m.cfg.Member, store.ErrInvalid, are)
		}
		return fmt.Errorf("herd: join %q: metrics: %w: %w", m.cfg.Group, store.ErrInvalid, err)
	}
	m.metrics = mm
	m.st = mm.Store(m.st)
	return nil
}

// ID is the member id.
func (m *Member) ID() string { return m.cfg.Member }

// Session is the id of the member's current session, "" between sessions.
func (m *Member) Session() string {
	if s := m.running.live.Load(); s != nil {
		return s.id
	}
	return ""
}

// SessionLive reports whether the member holds a live session: open, not
// lost or fenced, and its fence time not come. It is false between sessions
// and once the member has stopped. A health check can report it: while it
// is false the member runs no handler it could not be sure to own.
func (m *Member) SessionLive() bool {
	s := m.running.live.Load()
	return s != nil && s.ctx.Err() == nil && !s.pastFence()
}

// Owned lists, sorted, the partitions this member owns and runs a handler
// for, without those whose handlers are cancelled for a handoff or a loss.
func (m *Member) Owned() []string {
	m.running.mu.Lock()
	defer m.running.mu.Unlock()
	return slices.Sorted(maps.Keys(m.running.owned))
}

// KnownEpoch is the epoch of partition p's ownership record in the member's
// copy of the group, 0 if it has none. It costs no store call and the store
// may hold a later epoch: it tells a fenced writer which epoch superseded
// its own, it is no fence itself.
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
	m.wakeLoop()
	return nil
}

// ErrGroupInUse is returned by DeleteGroup when members of the group are
// alive and force is not set.
var ErrGroupInUse = store.ErrGroupInUse

// DeleteGroup deletes everything st holds for group: sessions, partition set,
// ownership records and checkpoints. It refuses with ErrGroupInUse while a
// member's session is alive, unless force is set. Members still running
// find their sessions gone, as after a store that lost its data, and write
// back the partition set and their checkpoints: make them Leave first.
func DeleteGroup(ctx context.Context, st store.Store, group string, force bool) error {
	if err := checkStoreArgs("delete group", ctx, st); err != nil {
		return err
	}
	if err := store.ValidateID("group", group); err != nil {
		return fmt.Errorf("herd: delete group: %w", err)
	}
	if err := st.DeleteGroup(ctx, group, force); err != nil {
		return fmt.Errorf("herd: delete group %q: %w", group, err)
	}
	return nil
}

func (m *Member) wakeLoop() { notify(m.events.wake) }

// notify sends on ch, a channel of capacity 1, unless a signal is pending.
func notify(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// lifecycle is how Join, Leave and the reconcile loop stop the member and
// say that it stopped and why.
type lifecycle struct {
	stop        context.CancelFunc // cancels Member.runCtx: a crash (Join's ctx) or the end of Leave
	attemptCtx  context.Context    // bounds the store calls between sessions; Leave cancels it, not to wait for them
	stopAttempt context.CancelFunc

	leaveOnce sync.Once
	leaveCh   chan struct{} // closed by Leave
	done      chan struct{} // closed when every goroutine has returned

	leaveRequested bool  // by the group's log (takeRequests), before leaveCh is closed: Err says ErrLeaveRequested
	err            error // why the member stopped, set by the reconcile loop before done is closed
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
	m.startLeave(false)
	select {
	case <-m.life.done:
		if err := m.Err(); err != nil && !errors.Is(err, ErrLeft) {
			return err
		}
		return nil
	case <-ctx.Done():
		m.running.mu.Lock()
		waiting := slices.Sorted(maps.Keys(m.running.handlers)) // those being handed off included
		m.running.mu.Unlock()
		if len(waiting) > 0 {
			return fmt.Errorf("herd: leave %q: handlers have not returned yet (%s): %w",
				m.cfg.Group, listIDs(waiting), ctx.Err())
		}
		return fmt.Errorf("herd: leave %q: every handler has returned; still releasing partitions and closing the session: %w",
			m.cfg.Group, ctx.Err())
	}
}

// startLeave starts a graceful leave unless the member is leaving already;
// requested (through the group's log) makes Err say ErrLeaveRequested.
func (m *Member) startLeave(requested bool) {
	m.life.leaveOnce.Do(func() {
		if requested {
			m.log.Info("leave requested through the group's log: leaving gracefully")
			m.life.leaveRequested = true
		}
		close(m.life.leaveCh)
		m.life.stopAttempt()
	})
}

// Done is closed when the member has stopped (left, or crashed via Join's ctx)
// and every goroutine it started has returned.
func (m *Member) Done() <-chan struct{} { return m.life.done }

// Err says why the member stopped (ErrLeft after Leave, ErrLeaveRequested
// after a leave requested through the group's log, the context's error
// after a cancellation); nil while running.
func (m *Member) Err() error {
	select {
	case <-m.life.done:
		return m.life.err
	default:
		return nil
	}
}

// runningSet is what the reconcile loop and the handlers' goroutines report
// of the partitions being run and the session, for Owned, Session and Leave.
type runningSet struct {
	mu       sync.Mutex
	owned    map[string]uint64       // partitions with a running handler -> epoch
	handlers map[string]int          // per partition, handler goroutines not returned (cancelled ones too)
	live     atomic.Pointer[session] // the open session, nil between sessions (read without mu)
}

func (r *runningSet) dropOwned() { r.mu.Lock(); clear(r.owned); r.mu.Unlock() }

func (m *Member) unown(p string) {
	m.running.mu.Lock()
	delete(m.running.owned, p)
	m.running.mu.Unlock()
}

func (m *Member) ownedCount() int {
	m.running.mu.Lock()
	defer m.running.mu.Unlock()
	return len(m.running.owned)
}

// ErrLeaveRequested: the member left the group gracefully because a request
// to leave naming it was logged in the group (store.RequestLeave, sent by
// the dashboard's "leave" action). Err returns it instead of ErrLeft after
// such a leave, and errors.Is(err, ErrLeft) holds for it too.
var ErrLeaveRequested = fmt.Errorf("herd: leave requested through the group's log: %w", ErrLeft)

// takeRequests acts on the requests among the entries call c read, at no
// store call of their own: one to leave naming this member starts a
// graceful leave, even between sessions; each goes to Config.onRequest.
func (f *feed) takeRequests(c *logCall) {
	if c.err != nil || c.cancelled || !c.kinds.has(store.Requested) {
		return
	}
	m := f.m
	for _, e := range c.cs {
		if e.Kind != store.Requested {
			continue
		}
		r := e.Request()
		if r.Action == store.RequestLeave && r.Member == m.cfg.Member {
			m.startLeave(true)
		}
		if m.cfg.onRequest != nil {
			m.cfg.onRequest(r)
		}
	}
}
