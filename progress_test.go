package herd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// cpStore counts the Checkpoint calls a store gets, per partition and
// epoch, with their (virtual) time, and can fail them.
type cpStore struct {
	store.Store
	fail atomic.Pointer[error] // if set, every Checkpoint fails with it (before reaching the store)

	mu     sync.Mutex
	writes []cpWrite
}

type cpWrite struct {
	partition string
	epoch     uint64
	at        time.Time
	value     string
	err       error
}

func (s *cpStore) Checkpoint(ctx context.Context, g, p string, e uint64, v []byte) error {
	var err error
	if f := s.fail.Load(); f != nil {
		err = *f
	} else {
		err = s.Store.Checkpoint(ctx, g, p, e, v)
	}
	s.mu.Lock()
	s.writes = append(s.writes, cpWrite{p, e, time.Now(), string(v), err})
	s.mu.Unlock()
	return err
}

func (s *cpStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.writes)
}

// checkpointOf reads the checkpoint the in-process store holds for p
// (snapshots carry none).
func checkpointOf(t *testing.T, st store.Store, p string) string {
	t.Helper()
	if cs, ok := st.(*cpStore); ok {
		st = cs.Store
	}
	mem, ok := st.(*memstore.Store)
	if !ok {
		t.Fatalf("checkpointOf: %T is not an in-process store", st)
	}
	v, _ := mem.StoredCheckpoint("g", p)
	return string(v)
}

// Partitions move twice under handlers that mark every item of a tight
// loop (one item per virtual millisecond): each successor starts from
// exactly the last position its predecessor marked, and the store gets at
// most one write per CheckpointInterval per partition and owner, plus the
// final one before the handoff.
func TestProgressTightLoopHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const P, interval = 8, time.Second
		st := &cpStore{Store: memstore.New()}
		type key struct {
			p     string
			epoch uint64
		}
		type run struct {
			from, last int
			start, end time.Time
			marks      int
		}
		var mu sync.Mutex
		runs := map[key]*run{}
		handler := func(c *herd.Claim) error {
			pos := 0
			if cp := c.LastCheckpoint(); cp != nil {
				n, err := strconv.Atoi(string(cp))
				if err != nil {
					return err
				}
				pos = n
			}
			r := &run{from: pos, start: time.Now()}
			for c.Context().Err() == nil {
				pos++ // one item processed
				if err := c.Mark([]byte(strconv.Itoa(pos))); err != nil {
					return err
				}
				r.marks++
				time.Sleep(time.Millisecond)
			}
			r.last, r.end = pos, time.Now()
			mu.Lock()
			runs[key{c.Partition, c.Epoch}] = r
			mu.Unlock()
			return nil
		}
		cfg := func(id string) herd.Config {
			return herd.Config{Group: "g", Member: id, Handler: handler, CheckpointInterval: interval}
		}
		ca := cfg("a")
		ca.Partitions = herd.Numbered(P)
		a, err := herd.Join(t.Context(), st, ca)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond)
		b, err := herd.Join(t.Context(), st, cfg("b"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2700 * time.Millisecond)
		if len(a.Owned()) != P/2 || len(b.Owned()) != P/2 {
			t.Fatalf("after b joined: a owns %v, b owns %v", a.Owned(), b.Owned())
		}
		if err := a.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2700 * time.Millisecond)
		if err := b.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}

		st.mu.Lock()
		defer st.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		// Each partition's owners in epoch order: each starts where the
		// previous one's last Mark left it, and the store ends at the last.
		marks := 0
		for i := range P {
			p := strconv.Itoa(i)
			var epochs []uint64
			for k := range runs {
				if k.p == p {
					epochs = append(epochs, k.epoch)
				}
			}
			slices.Sort(epochs)
			prev := 0
			for _, e := range epochs {
				r := runs[key{p, e}]
				marks += r.marks
				if r.from != prev {
					t.Errorf("partition %s at epoch %d started from %d, want %d (the last position marked before)", p, e, r.from, prev)
				}
				prev = r.last
			}
			if got := checkpointOf(t, st.Store, p); got != strconv.Itoa(prev) {
				t.Errorf("partition %s: stored checkpoint %q, want the last marked %d", p, got, prev)
			}
			if i < P/2 && len(epochs) != 2 || i >= P/2 && len(epochs) != 1 && len(epochs) != 2 {
				t.Logf("partition %s had %d owners", p, len(epochs))
			}
		}
		// Writes per owner: spaced by the interval at least, but for the
		// final one (before the release), and no more than the time owned
		// allows.
		byOwner := map[key][]cpWrite{}
		for _, w := range st.writes {
			if w.err != nil {
				t.Errorf("checkpoint of %s at epoch %d failed: %v", w.partition, w.epoch, w.err)
			}
			k := key{w.partition, w.epoch}
			byOwner[k] = append(byOwner[k], w)
		}
		moved := 0
		for k, ws := range byOwner {
			r := runs[k]
			if r == nil {
				t.Fatalf("writes for %v, which no handler ran", k)
			}
			for j := 1; j < len(ws)-1; j++ {
				if gap := ws[j].at.Sub(ws[j-1].at); gap < interval {
					t.Errorf("partition %s at epoch %d: writes %d and %d only %v apart", k.p, k.epoch, j-1, j, gap)
				}
			}
			if limit := int(r.end.Sub(r.start)/interval) + 1; len(ws) > limit {
				t.Errorf("partition %s at epoch %d: %d writes in %v, want at most %d", k.p, k.epoch, len(ws), r.end.Sub(r.start), limit)
			}
			if ws[len(ws)-1].value != strconv.Itoa(r.last) {
				t.Errorf("partition %s at epoch %d: last write %q, want the last mark %d", k.p, k.epoch, ws[len(ws)-1].value, r.last)
			}
			moved++
		}
		if moved != len(runs) {
			t.Errorf("%d owners wrote, of %d", moved, len(runs))
		}
		t.Logf("%d marks, %d store writes, %d owners of %d partitions", marks, len(st.writes), len(runs), P)
	})
}

// capture collects a member's log records.
type capture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func (c *capture) logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: level}))
}

// oneClaim joins a one-partition group and returns the claim its handler
// got, with the member; the handler runs until its context is cancelled
// and then calls last, if set.
func oneClaim(t *testing.T, st store.Store, cfg herd.Config, last func(c *herd.Claim)) (*herd.Member, *herd.Claim) {
	t.Helper()
	got := make(chan *herd.Claim, 1)
	cfg.Group, cfg.Member, cfg.Partitions = "g", "a", herd.Numbered(1)
	cfg.Handler = func(c *herd.Claim) error {
		got <- c
		<-c.Context().Done()
		if last != nil {
			last(c)
		}
		return nil
	}
	m, err := herd.Join(t.Context(), st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, <-got
}

// Mark and Checkpoint mixed: the later call wins; a timed write never
// overwrites a later Checkpoint.
func TestProgressMixedWithCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &cpStore{Store: memstore.New()}
		m, c := oneClaim(t, st, herd.Config{CheckpointInterval: time.Second}, nil)
		if err := c.Mark([]byte("a")); err != nil {
			t.Fatal(err)
		}
		if got := string(c.LastCheckpoint()); got != "a" {
			t.Fatalf("LastCheckpoint after Mark = %q, want a", got)
		}
		if err := c.Checkpoint(t.Context(), []byte("b")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		if got, n := checkpointOf(t, st, "0"), st.count(); got != "b" || n != 1 {
			t.Fatalf("after Mark(a), Checkpoint(b) and 3 intervals: stored %q after %d writes, want b after 1", got, n)
		}
		buf := []byte("c")
		if err := c.Mark(buf); err != nil {
			t.Fatal(err)
		}
		buf[0] = 'x' // Mark copied it
		if got := string(c.LastCheckpoint()); got != "c" {
			t.Fatalf("LastCheckpoint = %q, want c", got)
		}
		time.Sleep(1500 * time.Millisecond)
		if got, n := checkpointOf(t, st, "0"), st.count(); got != "c" || n != 2 {
			t.Fatalf("a Mark then an interval: stored %q after %d writes, want c after 2", got, n)
		}
		if err := m.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := st.count(); n != 2 {
			t.Fatalf("%d writes, want no final write for a value already stored", n)
		}
		err := c.Mark([]byte("late"))
		if !errors.Is(err, herd.ErrNotOwner) || !strings.Contains(err.Error(), "claim has ended") {
			t.Fatalf("Mark after the handler returned: %v, want ErrNotOwner saying the claim has ended", err)
		}
		if err := c.Mark(make([]byte, store.MaxCheckpointLength+1)); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Mark of an oversized value: %v, want ErrInvalid", err)
		}
	})
}

// The handler's last Mark, after its context was cancelled for a handoff,
// is written before the release; a Checkpoint given the cancelled
// c.Context() says why nothing was written.
func TestProgressFinalMarkAfterCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &cpStore{Store: memstore.New()}
		cpErr := make(chan error, 1)
		m, _ := oneClaim(t, st, herd.Config{}, func(c *herd.Claim) {
			cpErr <- c.Checkpoint(c.Context(), []byte("x"))
			if err := c.Mark([]byte("final")); err != nil {
				t.Error(err)
			}
		})
		if err := m.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		err := <-cpErr
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "record the last position with Mark") {
			t.Fatalf("Checkpoint(c.Context()) after cancellation: %v, want context.Canceled and advice", err)
		}
		if got, n := checkpointOf(t, st, "0"), st.count(); got != "final" || n != 1 {
			t.Fatalf("stored %q after %d writes, want final after 1", got, n)
		}
	})
}

// A timed write that fails is logged once and tried again; once the store
// refuses one (ErrNotOwner), writes end quietly and Mark says so.
func TestProgressFailedWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &cpStore{Store: memstore.New()}
		var logs capture
		m, c := oneClaim(t, st, herd.Config{CheckpointInterval: time.Second, Logger: logs.logger(slog.LevelInfo)}, nil)
		unavailable := fmt.Errorf("test: %w", store.ErrUnavailable)
		st.fail.Store(&unavailable)
		for i := range 5 {
			if err := c.Mark([]byte(strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1100 * time.Millisecond)
		}
		if n := strings.Count(logs.String(), "writing recorded progress failed"); n != 1 {
			t.Fatalf("%d warnings for 5 failed writes, want 1:\n%s", n, logs.String())
		}
		st.fail.Store(nil)
		time.Sleep(1100 * time.Millisecond) // the failed write is tried again
		if got := checkpointOf(t, st, "0"); got != "4" {
			t.Fatalf("stored %q after the store came back, want 4", got)
		}
		notOwner := fmt.Errorf("test: %w", store.ErrNotOwner)
		st.fail.Store(&notOwner)
		if err := c.Mark([]byte("5")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		n := st.count()
		if err := c.Mark([]byte("6")); !errors.Is(err, herd.ErrNotOwner) {
			t.Fatalf("Mark after a refused write: %v, want ErrNotOwner", err)
		}
		time.Sleep(3 * time.Second)
		st.fail.Store(nil)
		if err := m.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st.count() != n {
			t.Fatalf("%d writes after the refusal, want none", st.count()-n)
		}
		if strings.Count(logs.String(), "level=WARN") != 1 {
			t.Fatalf("want only the one warning:\n%s", logs.String())
		}
	})
}

// BenchmarkClaimMark is the cost of one Mark of a running claim (the
// store write it leads to, once per CheckpointInterval, is not in it).
func BenchmarkClaimMark(b *testing.B) {
	claims := make(chan *herd.Claim, 1)
	m, err := herd.Join(context.Background(), memstore.New(), herd.Config{Group: "g", Member: "m", Partitions: herd.Numbered(1),
		Logger: slog.New(slog.DiscardHandler),
		Handler: func(c *herd.Claim) error {
			claims <- c
			<-c.Context().Done()
			return nil
		}})
	if err != nil {
		b.Fatal(err)
	}
	c := <-claims
	pos := make([]byte, 0, 20)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := c.Mark(strconv.AppendInt(pos[:0], int64(i), 10)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := m.Leave(context.Background()); err != nil {
		b.Fatal(err)
	}
}
