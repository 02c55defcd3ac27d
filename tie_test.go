package herd_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
	"github.com/prometheus/client_golang/prometheus"
)

// tiedStore is a memstore that ties sessions the way the rule of
// store.ConnTied says: when a tie is lost or closed, the store ends its
// session Grace later (here by closing it).
type tiedStore struct {
	store.Store
	mu     sync.Mutex
	ties   []*fakeTie
	events []string // "tie <session>", "close <session>", "untie <session>" in order
	wg     sync.WaitGroup
}

type fakeTie struct {
	st      *tiedStore
	group   string
	session string
	grace   time.Duration
	lost    chan struct{}
	once    sync.Once
	closed  sync.Once
	closeAt time.Time
}

func (s *tiedStore) note(ev string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
}

func (s *tiedStore) TieSession(ctx context.Context, group, session string, cfg store.TieConfig) (store.Tie, error) {
	t := &fakeTie{st: s, group: group, session: session, grace: cfg.Grace, lost: make(chan struct{})}
	s.mu.Lock()
	s.ties = append(s.ties, t)
	s.mu.Unlock()
	s.note("tie " + session)
	return t, nil
}

func (s *tiedStore) CloseSession(ctx context.Context, group, session string) error {
	s.note("close " + session)
	return s.Store.CloseSession(ctx, group, session)
}

// cut is the connection's end, seen by the store: the session ends after
// the grace.
func (t *fakeTie) cut() {
	t.st.wg.Go(func() {
		time.Sleep(t.grace)
		_ = t.st.Store.CloseSession(context.Background(), t.group, t.session)
	})
}

// lose is the server ending the connection while the member lives.
func (t *fakeTie) lose() {
	t.once.Do(func() {
		close(t.lost)
		t.cut()
	})
}

func (t *fakeTie) Lost() <-chan struct{} { return t.lost }

func (t *fakeTie) Err() error {
	select {
	case <-t.lost:
		return errors.New("fake tie: connection ended")
	default:
		return nil
	}
}

func (t *fakeTie) Close() error {
	t.closed.Do(func() {
		t.closeAt = time.Now()
		t.st.note("untie " + t.session)
		t.once.Do(t.cut)
	})
	return nil
}

// tiesOf returns the ties made for member's sessions (by the session ids
// the member had).
func (s *tiedStore) tiesOf(sessions map[string]bool) []*fakeTie {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*fakeTie
	for _, t := range s.ties {
		if sessions[t.session] {
			out = append(out, t)
		}
	}
	return out
}

// runLog records when each member's handlers start and return.
type runLog struct {
	mu      sync.Mutex
	starts  map[string][]time.Time // partition -> start times (any member)
	returns map[string]time.Time   // partition -> when a's handler returned
	causes  []error                // a's handlers' context causes
}

func (r *runLog) handler(member string, linger time.Duration) herd.Handler {
	return func(c *herd.Claim) error {
		r.mu.Lock()
		r.starts[c.Partition] = append(r.starts[c.Partition], time.Now())
		r.mu.Unlock()
		<-c.Context().Done()
		time.Sleep(linger) // a handler that takes this long to stop
		r.mu.Lock()
		if member == "a" {
			r.returns[c.Partition] = time.Now()
			r.causes = append(r.causes, context.Cause(c.Context()))
		}
		r.mu.Unlock()
		return nil
	}
}

// A tied member whose connection the server ends while it lives cancels
// its handlers at once (with ErrTieLost, an ErrFenced); nobody starts its
// partitions before they have returned; it opens and ties a new session,
// and every partition runs again in well under the TTL.
func TestTieLostFencesBeforeTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := &tiedStore{Store: memstore.New()}
		defer st.wg.Wait()
		rl := &runLog{starts: map[string][]time.Time{}, returns: map[string]time.Time{}}
		quiet := slog.New(slog.DiscardHandler)
		a, err := herd.Join(ctx, st, herd.Config{Group: "g", Member: "a", Partitions: herd.Numbered(8),
			Handler: rl.handler("a", 100*time.Millisecond), Logger: quiet, TieSession: true})
		if err != nil {
			t.Fatal(err)
		}
		b, err := herd.Join(ctx, st, herd.Config{Group: "g", Member: "b", Handler: rl.handler("b", 0), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		mine := a.Owned()
		if len(mine) != 4 {
			t.Fatalf("a owns %v; want 4 of 8", mine)
		}
		first := a.Session()
		ties := st.tiesOf(map[string]bool{first: true})
		if len(ties) != 1 {
			t.Fatalf("%d ties of a's session; want 1", len(ties))
		}

		lostAt := time.Now()
		ties[0].lose()
		time.Sleep(100 * time.Millisecond) // a's handlers linger this long
		synctest.Wait()
		rl.mu.Lock()
		for _, p := range mine {
			if r, ok := rl.returns[p]; !ok || r.After(lostAt.Add(100*time.Millisecond)) {
				t.Errorf("partition %s: a's handler returned at %v (ok %v); want 100ms after its cancellation at %v", p, r, ok, lostAt)
			}
		}
		for _, c := range rl.causes {
			if !errors.Is(c, herd.ErrTieLost) || !errors.Is(c, herd.ErrFenced) {
				t.Errorf("a handler's context cause %v; want ErrTieLost, an ErrFenced", c)
			}
		}
		rl.mu.Unlock()

		time.Sleep(time.Second)
		synctest.Wait()
		rl.mu.Lock()
		for _, p := range mine {
			for _, s := range rl.starts[p] {
				if s.After(lostAt) && s.Before(rl.returns[p]) {
					t.Errorf("partition %s started again at %v, before a's handler returned at %v", p, s, rl.returns[p])
				}
			}
		}
		rl.mu.Unlock()
		if n := len(a.Owned()) + len(b.Owned()); n != 8 {
			t.Errorf("%d partitions run 1s after the tie was lost (a %v, b %v); want all 8", n, a.Owned(), b.Owned())
		}
		if s := a.Session(); s == "" || s == first {
			t.Errorf("a's session after the loss: %q (was %q); want a new one", s, first)
		} else if len(st.tiesOf(map[string]bool{s: true})) != 1 {
			t.Errorf("a's new session %s is not tied", s)
		}
		cancel()
		<-a.Done()
		<-b.Done()
	})
}

// The tie of a leaving member goes only after its session is closed and
// its handlers have returned, however long they take: otherwise the
// store could end the session while a handler still runs.
func TestTieClosedAfterHandlersReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := &tiedStore{Store: memstore.New()}
		defer st.wg.Wait()
		rl := &runLog{starts: map[string][]time.Time{}, returns: map[string]time.Time{}}
		a, err := herd.Join(ctx, st, herd.Config{Group: "g", Member: "a", Partitions: herd.Numbered(4),
			Handler: rl.handler("a", 3*time.Second), Logger: slog.New(slog.DiscardHandler), TieSession: true})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		sess := a.Session()
		if err := a.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		ties := st.tiesOf(map[string]bool{sess: true})
		if len(ties) != 1 {
			t.Fatalf("%d ties of a's session; want 1", len(ties))
		}
		rl.mu.Lock()
		for p, r := range rl.returns {
			if ties[0].closeAt.Before(r) {
				t.Errorf("the tie was closed at %v, before partition %s's handler returned at %v", ties[0].closeAt, p, r)
			}
		}
		rl.mu.Unlock()
		st.mu.Lock()
		got := strings.Join(st.events, ", ")
		st.mu.Unlock()
		if want := "tie " + sess + ", close " + sess + ", untie " + sess; got != want {
			t.Errorf("store events %q; want %q", got, want)
		}
	})
}

// Without Config.TieSession, a store that can tie is not asked to.
func TestTieOffByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := &tiedStore{Store: memstore.New()}
		a, err := herd.Join(ctx, st, herd.Config{Group: "g", Member: "a", Partitions: herd.Numbered(2),
			Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil }, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if err := a.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		if len(st.ties) != 0 {
			t.Errorf("%d ties made with TieSession off", len(st.ties))
		}
	})
}

// A member with metrics ties its session too: the metrics' wrapper of its
// store does not hide the store's ConnTied.
func TestTieWithMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := &tiedStore{Store: memstore.New()}
		a, err := herd.Join(ctx, st, herd.Config{Group: "g", Member: "a", Partitions: herd.Numbered(2), TieSession: true,
			Metrics: prometheus.NewRegistry(),
			Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil }, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if err := a.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		st.wg.Wait()
		if len(st.ties) != 1 {
			t.Errorf("%d ties made with TieSession on and metrics; want 1", len(st.ties))
		}
	})
}

func TestTieGraceValidated(t *testing.T) {
	c := herd.Config{Group: "g", Member: "m", Handler: ok, TieSession: true}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults with TieSession rejected: %v", err)
	}
	c.TieGrace = 2 * time.Second // above the default FenceMargin, 1s
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "TieGrace") {
		t.Errorf("TieGrace above FenceMargin: %v; want an error naming TieGrace", err)
	}
}

// The default grace is FenceMargin/4: 250 ms at the default TTL, so that a
// killed member is taken over within half a second (docs/takeover.md).
func TestTieGraceDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := &tiedStore{Store: memstore.New()}
		quiet := slog.New(slog.DiscardHandler)
		m, err := herd.Join(ctx, st, herd.Config{Group: "g", Member: "a", Partitions: herd.Numbered(2),
			Handler: ok, Logger: quiet, TieSession: true})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		st.mu.Lock()
		var grace time.Duration
		if len(st.ties) > 0 {
			grace = st.ties[0].grace
		}
		st.mu.Unlock()
		if want := herd.DefaultSessionTTL / 40; grace != want {
			t.Errorf("default tie grace %v; want %v (FenceMargin/4)", grace, want)
		}
		if err := m.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		st.wg.Wait()
	})
}
