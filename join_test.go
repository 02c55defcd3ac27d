package herd_test

import (
	"bytes"
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
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// logBuffer collects a member's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// warnings returns the WARN lines that contain substr.
func (b *logBuffer) warnings(substr string) []string {
	var out []string
	for l := range strings.Lines(b.String()) {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

func leave(t *testing.T, m *herd.Member) {
	t.Helper()
	if err := m.Leave(t.Context()); err != nil {
		t.Fatalf("Leave: %v", err)
	}
}

// A group knows its kind: a member of the other kind (jobs' keys in a group
// of partitions, or the reverse) is refused with ErrGroupKind, and the
// group's set is left as it was.
func TestJoinRefusesGroupOfAnotherKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		quiet := slog.New(slog.DiscardHandler)
		a, err := herd.Join(t.Context(), st, herd.Config{Group: "dup", Member: "a", Partitions: herd.Numbered(4), Handler: ok, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer leave(t, a)
		for _, ps := range [][]store.Partition{nil, {{ID: "x"}, {ID: "y"}}} {
			_, err := herd.Join(t.Context(), st, herd.Config{Group: "dup", Member: "j", Kind: store.KindKeys, Partitions: ps, Handler: ok, Logger: quiet})
			if !errors.Is(err, store.ErrGroupKind) || !strings.Contains(err.Error(), "another group") && !strings.Contains(err.Error(), "pick another group") {
				t.Fatalf("Join of a keys member (partitions %v) into a group of partitions: %v; want ErrGroupKind saying what to do", ps, err)
			}
		}
		snap, err := st.Snapshot(t.Context(), "dup")
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Partitions) != 4 || snap.Kind != store.KindPartitions {
			t.Fatalf("after the refused joins: %d partitions, kind %q; want the 4 partitions, kind partitions", len(snap.Partitions), snap.Kind)
		}
	})
}

// With KeepStoredPartitions (herd run's rule) the stored set wins: a member
// given another set joins on the stored one and says so; without it (the
// library's rule) the set given replaces the stored one, with a WARN.
func TestJoinPartitionSetRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var logs logBuffer
		join := func(member string, n int, keep bool) *herd.Member {
			m, err := herd.Join(t.Context(), st, herd.Config{Group: "g", Member: member, Partitions: herd.Numbered(n),
				KeepStoredPartitions: keep, Handler: ok, Logger: logs.logger()})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		parts := func() int {
			snap, err := st.Snapshot(t.Context(), "g")
			if err != nil {
				t.Fatal(err)
			}
			return len(snap.Partitions)
		}
		a := join("a", 4, true)
		defer leave(t, a)
		b := join("b", 8, true)
		defer leave(t, b)
		if n := parts(); n != 4 {
			t.Fatalf("a member with 8 partitions and KeepStoredPartitions joined a group of 4: the group has %d; want 4, the stored set wins", n)
		}
		if w := logs.warnings("differs from the one the group holds"); len(w) != 1 {
			t.Fatalf("WARN lines about a differing set: %q; want one, from b", w)
		}
		c := join("c", 4, true) // the same set: no word
		defer leave(t, c)
		if w := logs.warnings("differs"); len(w) != 1 {
			t.Fatalf("a member joining with the stored set logged %q; want nothing more", w)
		}
		d := join("d", 6, false)
		defer leave(t, d)
		if n := parts(); n != 6 {
			t.Fatalf("a library member with 6 partitions joined: the group has %d; want 6, Config.Partitions replaces the set", n)
		}
		if w := logs.warnings("replaced the group's partition set"); len(w) != 1 {
			t.Fatalf("WARN lines about a replaced set: %q; want one", w)
		}
	})
}

// A member that joins a group with no partition set says what to do.
func TestJoinWithoutPartitionSetWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		m, err := herd.Join(t.Context(), memstore.New(), herd.Config{Group: "fresh", Member: "a", Handler: ok, Logger: logs.logger()})
		if err != nil {
			t.Fatal(err)
		}
		defer leave(t, m)
		if w := logs.warnings("no partition set"); len(w) != 1 || !strings.Contains(w[0], "herd partitions set") {
			t.Fatalf("WARN lines about a missing set: %q; want one that names herd partitions set", w)
		}
	})
}

// A store that is unavailable while a member joins is retried, each retry
// logged at WARN with its cause, until it answers.
func TestJoinRetriesUnavailableStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := faultstore.Wrap(memstore.New())
		st.SetCut(true)
		var logs logBuffer
		go func() {
			time.Sleep(3 * time.Second) // virtual time: the store comes back
			st.SetCut(false)
		}()
		start := time.Now()
		m, err := herd.Join(t.Context(), st, herd.Config{Group: "g", Member: "a", Partitions: herd.Numbered(2), Handler: ok, Logger: logs.logger()})
		if err != nil {
			t.Fatalf("Join while the store was down for 3s: %v; want it to retry until the store answers", err)
		}
		defer leave(t, m)
		if took := time.Since(start); took < 3*time.Second || took > 3*time.Second+5*time.Second {
			t.Fatalf("Join took %v; want it to return soon after the store came back at 3s", took)
		}
		w := logs.warnings("store unavailable; retrying")
		if len(w) < 2 || !strings.Contains(w[0], "err=") || !strings.Contains(w[0], "unavailable") {
			t.Fatalf("WARN lines of the retries: %q; want several, each with its cause", w)
		}
	})
}

// A store that never answers: Join gives up at JoinTimeout with the
// store's error, and no sooner.
func TestJoinGivesUpAtJoinTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := faultstore.Wrap(memstore.New())
		st.SetCut(true)
		start := time.Now()
		_, err := herd.Join(t.Context(), st, herd.Config{Group: "g", Member: "a", Handler: ok,
			JoinTimeout: 20 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		took := time.Since(start)
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "attempts") {
			t.Fatalf("Join against a store that never answers: %v; want ErrUnavailable after the retries", err)
		}
		if took < 20*time.Second || took > 21*time.Second {
			t.Fatalf("Join gave up after %v; want JoinTimeout, 20s", took)
		}
		// The caller's context ends it sooner.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start = time.Now()
		if _, err := herd.Join(ctx, st, herd.Config{Group: "g", Member: "a", Handler: ok, Logger: slog.New(slog.DiscardHandler)}); err == nil {
			t.Fatal("Join with a context of 2s against a store that never answers: nil error")
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("Join with a context of 2s returned after %v", took)
		}
	})
}
