package herd_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
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

// logLines records every log line a member writes (level and message,
// with the attributes as text).
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

// count returns the lines at level or above that contain every one of words.
func (l *logLines) count(level slog.Level, words ...string) (n int, sample string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if !strings.HasPrefix(line, level.String()) && !(level == slog.LevelWarn && strings.HasPrefix(line, "ERROR")) {
			continue
		}
		if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(line, w) }) {
			n++
			sample = line
		}
	}
	return n, sample
}

// malformedStore shows a memstore group as a Redis group with malformed
// records would be: the ownership record of partition bad and a session
// "ghost" cannot be decoded, so Snapshot leaves them out and lists them
// (members never claim bad, so no claim reaches the store to fail with
// ErrCorrupt). With corrupt set, every
// Snapshot fails with ErrCorrupt, as a key of the wrong type makes it.
type malformedStore struct {
	store.Store
	bad      string
	corrupt  atomic.Bool
	unlisted bool // the record of bad is left out of snapshots but not listed as malformed
}

func (s *malformedStore) Snapshot(ctx context.Context, g string) (*store.Snapshot, error) {
	if s.corrupt.Load() {
		return nil, fmt.Errorf("test: a key holds the wrong kind of value: %w", store.ErrCorrupt)
	}
	snap, err := s.Store.Snapshot(ctx, g)
	if err != nil {
		return nil, err
	}
	out := *snap // the memstore's lists are shared: copy what changes
	out.Owners = slices.DeleteFunc(slices.Clone(snap.Owners), func(o store.Ownership) bool { return o.Partition == s.bad })
	if s.unlisted {
		return &out, nil
	}
	out.Malformed = []store.Malformed{
		{Kind: store.MalformedOwnership, ID: s.bad, Reason: `value "garbage" is not <epoch>:<session>:<member>`},
		{Kind: store.MalformedSession, ID: strings.Repeat("ghost", 200), Reason: "live session has no member record"},
	}
	return &out, nil
}

// TestScenarioMalformedRecordCostsItsPartitionOnly: a malformed ownership
// record costs its own partition and nothing else: two members run the other
// seven partitions, balanced, nobody tries to claim the bad one, and each
// member reports each malformed record once, at WARN, with a capped id, not
// on every read.
func TestScenarioMalformedRecordCostsItsPartitionOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		mem := memstore.New()
		st := &malformedStore{Store: mem, bad: "3"}
		logs := &logLines{}
		var ms []*herd.Member
		for _, id := range []string{"a", "b"} {
			m, err := herd.Join(ctx, st, herd.Config{
				Group: "g", Member: id, Partitions: herd.Numbered(8),
				Logger:  slog.New(logs),
				Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		time.Sleep(30 * time.Second) // virtual: many reads (polls, wake-ups)
		synctest.Wait()
		var all []string
		for _, m := range ms {
			all = append(all, m.Owned()...)
			if n := len(m.Owned()); n < 3 || n > 4 {
				t.Errorf("member %s runs %v; want 3 or 4 of the 7 good partitions", m.ID(), m.Owned())
			}
		}
		slices.Sort(all)
		if want := []string{"0", "1", "2", "4", "5", "6", "7"}; !slices.Equal(all, want) {
			t.Errorf("the members run %v; want %v (every partition but the malformed one)", all, want)
		}
		if n, line := logs.count(slog.LevelWarn, "malformed", "kind=ownership", `id="3"`); n != 2 {
			t.Errorf("%d WARN lines report the malformed record of partition 3 (last: %q); want one per member", n, line)
		}
		if n, line := logs.count(slog.LevelWarn, "malformed", "kind=session"); n != 2 || len(line) > 400 {
			t.Errorf("%d WARN lines report the malformed session (last: %q, %d bytes); want one per member, with the id capped", n, line, len(line))
		}
		if n, line := logs.count(slog.LevelWarn); n != 4 {
			t.Errorf("%d WARN lines in all (last: %q); want only the 4 reports", n, line)
		}
		for _, m := range ms {
			if err := m.Leave(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestScenarioCorruptGroupLogsOnce: when every read of the group fails with
// ErrCorrupt (a key of the wrong type), a member reports it once and retries
// with back-off, instead of logging every attempt.
func TestScenarioCorruptGroupLogsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := &malformedStore{Store: memstore.New(), bad: "3"}
		st.corrupt.Store(true)
		logs := &logLines{}
		m, err := herd.Join(ctx, st, herd.Config{
			Group: "g", Member: "a", Partitions: herd.Numbered(8),
			Logger:  slog.New(logs),
			Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if n, line := logs.count(slog.LevelWarn, "wrong kind of value"); n != 1 {
			t.Errorf("%d WARN lines about the corrupt group in 15 s (last: %q); want 1", n, line)
		}
		st.corrupt.Store(false) // repaired: the member goes on
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := len(m.Owned()); n != 7 {
			t.Errorf("after the repair the member runs %v; want the 7 good partitions", m.Owned())
		}
		if err := m.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestScenarioCorruptClaimSkipsOnlyItsPartition: a Claim that fails with
// ErrCorrupt (the record broke after the read that made the member claim
// it) costs that partition only: the member goes on claiming the others in
// the same round, instead of giving up the round at the bad one.
func TestScenarioCorruptClaimSkipsOnlyItsPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := &malformedStore{Store: memstore.New(), bad: "3", unlisted: true}
		m, err := herd.Join(ctx, st, herd.Config{
			Group: "g", Member: "a", Partitions: herd.Numbered(8),
			Logger:  slog.New(slog.DiscardHandler),
			Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got, want := m.Owned(), []string{"0", "1", "2", "4", "5", "6", "7"}; !slices.Equal(got, want) {
			t.Errorf("the member runs %v; want %v (every partition but the one whose Claim fails)", got, want)
		}
		if err := m.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// ClaimBatch is Claim of each partition: a batch that names bad gets
// ErrCorrupt for it alone.
func (s *malformedStore) ClaimBatch(ctx context.Context, g, sess string, ps []string) ([]store.ClaimResult, error) {
	i := slices.Index(ps, s.bad)
	if i < 0 {
		return s.Store.ClaimBatch(ctx, g, sess, ps)
	}
	rest := slices.Delete(slices.Clone(ps), i, i+1)
	var res []store.ClaimResult
	if len(rest) > 0 {
		var err error
		if res, err = s.Store.ClaimBatch(ctx, g, sess, rest); err != nil {
			return nil, err
		}
	}
	return slices.Insert(res, i, store.ClaimResult{Err: fmt.Errorf("test: record of %q cannot be decoded: %w", s.bad, store.ErrCorrupt)}), nil
}
