package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/pause"
	"github.com/herdhq/herd/internal/reqhook"
	"github.com/herdhq/herd/store"
)

// Scheduler is one member of a jobs group: it owns a share of the keys and
// runs each owned key when it is due.
type Scheduler struct {
	cfg    Config
	def    Schedule // Every or Cron; nil if only Config.Schedule is set
	member string
	log    *slog.Logger
	met    *metrics
	sem    chan struct{} // MaxConcurrent tokens
	m      *herd.Member
	done   chan struct{} // closed once the member has stopped and the metrics are unregistered
	// skewLogged holds the keys whose skewed record has been logged.
	skewLogged sync.Map
	// requests maps each key this member runs to its handler's channel
	// of requests (request.go).
	requests sync.Map
}

// Start joins cfg.Group as a member and starts running the keys it owns.
// It returns once the member's session is open. Cancelling ctx stops the
// member as a crash would (runs cancelled, nothing handed over: others take
// the keys, and repeat the runs under way, once the session expires);
// call Leave to hand over gracefully.
func Start(ctx context.Context, cfg Config) (*Scheduler, error) {
	if ctx == nil {
		return nil, fmt.Errorf("jobs: start: the context is nil: %w", store.ErrInvalid)
	}
	cfg = cfg.withDefaults()
	def, err := cfg.validate()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, store.ErrInvalid)
	}
	if cfg.Member == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "member"
		}
		cfg.Member = host + "-" + strconv.Itoa(os.Getpid())
	}
	s := &Scheduler{
		cfg:    cfg,
		def:    def,
		member: cfg.Member,
		log:    cfg.Logger.With("group", cfg.Group, "member", cfg.Member),
		sem:    make(chan struct{}, cfg.MaxConcurrent),
		done:   make(chan struct{}),
	}
	var ps []store.Partition
	if cfg.Keys != nil {
		ps = partitions(cfg.Keys)
	}
	hc := herd.Config{
		Group:       cfg.Group,
		Member:      cfg.Member,
		Weight:      cfg.Weight,
		Partitions:  ps,
		Kind:        store.KindKeys,
		Handler:     s.handle,
		JoinTimeout: cfg.JoinTimeout,
		// KeepStoredPartitions: see Config.KeepStoredKeys.
		KeepStoredPartitions: cfg.KeepStoredKeys,
		SessionTTL:           cfg.SessionTTL,
		MaxShutdown:          cfg.MaxShutdown,
		Logger:               cfg.Logger,
		Metrics:              cfg.Metrics,
		// A key's load is only what its runs report (Run.ReportLoad,
		// and reqhook.SetHerdOwnLoads below): the rate of its runs'
		// checkpoints would show a long run as idle.
		LoadReportInterval: cfg.LoadReportInterval,
		TieSession:         cfg.TieSession,
	}
	pause.SetHerdGate.(func(*herd.Config, *pause.Gate))(&hc, cfg.gate)
	reqhook.SetHerdHandler.(func(*herd.Config, func(store.Request)))(&hc, s.onRequest)
	reqhook.SetHerdOwnLoads.(func(*herd.Config))(&hc)
	if err := hc.Validate(); err != nil {
		if !errors.Is(err, store.ErrInvalid) {
			err = fmt.Errorf("%w: %w", err, store.ErrInvalid)
		}
		return nil, fmt.Errorf("jobs: %w", err)
	}
	if s.met, err = newMetrics(cfg.Metrics, cfg.Group, cfg.Member); err != nil {
		return nil, err
	}
	m, err := herd.Join(ctx, cfg.Store, hc)
	if err != nil {
		s.met.unregister()
		return nil, err
	}
	s.m = m
	go func() {
		<-m.Done()
		s.met.unregister()
		close(s.done)
	}()
	return s, nil
}

// SetKeys replaces the group's keys for every member: new keys start
// running at their next slot, removed keys stop (a run under way is
// cancelled as in a handoff). Their records stay in the store, so a key
// that comes back resumes its schedule and counts.
func (s *Scheduler) SetKeys(ctx context.Context, keys []string) error {
	ps := partitions(keys)
	if err := store.ValidatePartitions(ps); err != nil {
		return fmt.Errorf("jobs: set keys: %w", err)
	}
	if err := s.m.SetPartitions(ctx, ps); err != nil {
		return fmt.Errorf("jobs: set keys: %w", err)
	}
	return nil
}

// Leave hands every key over gracefully: runs under way are cancelled
// (Run's context), each key is released as soon as its run has returned and
// its record says so, and the member leaves. Another member runs an
// interrupted slot again at once. It returns when that is done, or with an
// error if ctx ends first.
func (s *Scheduler) Leave(ctx context.Context) error {
	if err := s.m.Leave(ctx); err != nil {
		return err
	}
	<-s.done
	return nil
}

// Done is closed when the member has stopped (after Leave, or when Start's
// context was cancelled).
func (s *Scheduler) Done() <-chan struct{} { return s.done }

// Err says why the member stopped (herd.ErrLeft after Leave), nil while it
// runs.
func (s *Scheduler) Err() error { return s.m.Err() }

// Member is the herd member under the scheduler: its id, the keys it owns
// (Owned), its health (SessionLive).
func (s *Scheduler) Member() *herd.Member { return s.m }

// schedule returns key's schedule, nil if it has none.
func (s *Scheduler) schedule(key string) Schedule {
	if s.cfg.Schedule != nil {
		if sch := s.cfg.Schedule(key); sch != nil {
			return sch
		}
	}
	return s.def
}
