package herd_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/balance"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ok(*herd.Claim) error { return nil }

func TestConfigValidate(t *testing.T) {
	good := herd.Config{Group: "g", Member: "m", Handler: ok}
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	cases := []struct {
		name string
		cfg  herd.Config
		want string
	}{
		{"no group", herd.Config{Handler: ok}, "Group"},
		{"no handler", herd.Config{Group: "g"}, "Handler is required"},
		{"control char in group", herd.Config{Group: "a\nb", Handler: ok}, "control character"},
		{"renew too slow", herd.Config{Group: "g", Handler: ok, SessionTTL: 3 * time.Second, RenewInterval: 2 * time.Second}, "RenewInterval"},
		{"margin over ttl", herd.Config{Group: "g", Handler: ok, SessionTTL: time.Second, FenceMargin: 2 * time.Second}, "FenceMargin"},
		{"timeout over interval", herd.Config{Group: "g", Handler: ok, RenewInterval: time.Second, RenewTimeout: 2 * time.Second}, "RenewTimeout"},
		{"tiny ttl", herd.Config{Group: "g", Handler: ok, SessionTTL: time.Millisecond}, "below 10ms"},
		{"negative", herd.Config{Group: "g", Handler: ok, MaxShutdown: -time.Second}, "negative"},
		{"duplicate partitions", herd.Config{Group: "g", Handler: ok, Partitions: []herd.Partition{{ID: "a"}, {ID: "a"}}}, "twice"},
		{"load reports too often", herd.Config{Group: "g", Handler: ok, LoadReportInterval: 100 * time.Millisecond}, "LoadReportInterval"},
		{"negative load budget", herd.Config{Group: "g", Handler: ok, LoadBalance: balance.LoadOptions{MaxMoves: -1}}, "LoadBalance"},
	}
	off := herd.Config{Group: "g", Member: "m", Handler: ok, LoadReportInterval: -1}
	if err := off.Validate(); err != nil {
		t.Fatalf("LoadReportInterval -1 (no reports) rejected: %v", err)
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate() = %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
}

func TestJoinRejectsBadConfig(t *testing.T) {
	if _, err := herd.Join(t.Context(), memstore.New(), herd.Config{Group: "g"}); err == nil {
		t.Fatal("Join accepted a config without a handler")
	}
}

// A handler that panics or fails keeps its partition and is restarted; the
// member does not crash.
func TestHandlerFailureRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var starts atomic.Int32
		m, err := herd.Join(t.Context(), memstore.New(), herd.Config{
			Group: "g", Member: "m", Partitions: herd.Numbered(1),
			Handler: func(c *herd.Claim) error {
				n := starts.Add(1)
				if n == 1 {
					panic("boom")
				}
				if n == 2 {
					return errors.New("failed")
				}
				<-c.Context().Done()
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		if starts.Load() != 3 || len(m.Owned()) != 1 {
			t.Fatalf("handler started %d times, owned %v; want 3 starts and the partition kept", starts.Load(), m.Owned())
		}
		if err := m.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// A handler may write a final checkpoint after its context is cancelled for
// a handoff; a stale claim's checkpoint is rejected with ErrNotOwner.
func TestFinalCheckpointAndFencing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var first *herd.Claim
		final := make(chan error, 1)
		a, err := herd.Join(t.Context(), st, herd.Config{
			Group: "g", Member: "a", Partitions: herd.Numbered(1),
			Handler: func(c *herd.Claim) error {
				first = c
				<-c.Context().Done()
				final <- c.Checkpoint(context.Background(), []byte("final"))
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // virtual: past JoinSettle, the handler runs
		if len(a.Owned()) != 1 {
			t.Fatalf("a owns %v after a second, want the partition", a.Owned())
		}
		if err := a.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-final; err != nil {
			t.Fatalf("final checkpoint during handoff: %v", err)
		}
		got := make(chan []byte, 1)
		b, err := herd.Join(t.Context(), st, herd.Config{
			Group: "g", Member: "b",
			Handler: func(c *herd.Claim) error {
				got <- c.LastCheckpoint()
				<-c.Context().Done()
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if v := <-got; string(v) != "final" {
			t.Fatalf("next owner started from %q, want %q", v, "final")
		}
		err = first.Checkpoint(context.Background(), []byte("stale"))
		if !errors.Is(err, herd.ErrNotOwner) || !strings.Contains(err.Error(), "no longer owns") {
			t.Fatalf("stale checkpoint: %v, want ErrNotOwner with a clear message", err)
		}
		if err := b.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Only Claim returns a checkpoint: read it by claiming the record.
		reader, err := st.OpenSession(t.Context(), "g", "reader", 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		o, err := store.Claim(t.Context(), st, "g", "0", reader)
		if err != nil {
			t.Fatal(err)
		}
		if string(o.Checkpoint) != "final" {
			t.Fatalf("stale write went through: %q", o.Checkpoint)
		}
		if err := st.CloseSession(t.Context(), "g", reader); err != nil {
			t.Fatal(err)
		}
	})
}

// The first session may take longer to open than a renewal may take (a new
// connection's first call): Join waits up to SessionTTL-FenceMargin for it,
// and fails after that.
func TestJoinWaitsForFirstSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := faultstore.Wrap(memstore.New())
		cfg := herd.Config{Group: "g", Member: "a", Handler: ok, SessionTTL: time.Second,
			Logger: slog.New(slog.DiscardHandler)} // RenewTimeout 333ms, FenceMargin 100ms
		fs.SetLatency(500 * time.Millisecond)
		m, err := herd.Join(t.Context(), fs, cfg)
		if err != nil {
			t.Fatalf("Join with 500ms per call, TTL 1s: %v", err)
		}
		fs.SetLatency(0)
		if err := m.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		fs.SetLatency(time.Second)
		cfg.Member = "b"
		if m, err := herd.Join(t.Context(), fs, cfg); err == nil {
			m.Leave(t.Context())
			t.Fatal("Join with 1s per call, TTL 1s: opened a session past its fence time")
		}
	})
}
