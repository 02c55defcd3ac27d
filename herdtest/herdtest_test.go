package herdtest_test

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/herdtest"
	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store/memstore"
)

// returned reports whether done is closed, once the bubble is idle.
func returned(done <-chan struct{}) bool {
	synctest.Wait()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// oneClaimConfig is a member's config on one partition whose handler
// sends its claim to claims and runs until cancelled.
func oneClaimConfig(claims chan<- *herd.Claim) herd.Config {
	return herd.Config{
		Group: "g", Member: "a", Partitions: herd.Numbered(1),
		Logger: slog.New(slog.DiscardHandler),
		Handler: func(c *herd.Claim) error {
			claims <- c
			<-c.Context().Done()
			return nil
		},
	}
}

// A member given a paused gate with WithGate is stopped at its next step
// (here: a checkpoint) until the gate is resumed; a nil gate removes it.
func TestWithGatePausesTheMember(t *testing.T) {
	for _, removed := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			claims := make(chan *herd.Claim, 1)
			cfg := oneClaimConfig(claims)
			gate := &herdtest.Gate{}
			herdtest.WithGate(&cfg, gate)
			if removed {
				herdtest.WithGate(&cfg, nil)
			}
			m, err := herd.Join(t.Context(), memstore.New(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Leave(context.Background())
			c := <-claims
			gate.Pause()
			if !gate.Paused() {
				t.Fatal("Paused after Pause = false")
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				if err := c.Checkpoint(t.Context(), []byte("x")); err != nil {
					t.Errorf("Checkpoint: %v", err)
				}
			}()
			if got := returned(done); got != removed {
				t.Fatalf("gate removed %v: Checkpoint returned while paused = %v; want %v", removed, got, removed)
			}
			gate.Resume()
			if !returned(done) {
				t.Fatal("Checkpoint still blocked after Resume")
			}
		})
	}
}

// A jobs member given a paused gate with WithJobsGate does not start (its
// session is not opened) until the gate is resumed.
func TestWithJobsGatePausesTheMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := jobs.Config{
			Store: memstore.New(), Group: "g", Member: "a",
			Keys: []string{"k"}, Every: time.Minute,
			Run:    func(context.Context, jobs.Run) error { return nil },
			Logger: slog.New(slog.DiscardHandler),
		}
		gate := &herdtest.Gate{}
		gate.Pause()
		herdtest.WithJobsGate(&cfg, gate)
		done := make(chan struct{})
		var s *jobs.Scheduler
		go func() {
			defer close(done)
			var err error
			if s, err = jobs.Start(t.Context(), cfg); err != nil {
				t.Errorf("Start: %v", err)
			}
		}()
		if returned(done) {
			t.Fatal("Start returned while the gate was paused")
		}
		gate.Resume()
		if !returned(done) {
			t.Fatal("Start still blocked after Resume")
		}
		if s != nil {
			if err := s.Leave(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// The nil gate and nil configs are accepted.
func TestNilGateAndConfig(t *testing.T) {
	var g *herdtest.Gate
	if g.Paused() {
		t.Error("a nil gate is paused")
	}
	herdtest.WithGate(nil, g)
	herdtest.WithJobsGate(nil, g)
}

// Checkpoint with a nil context fails with an error, also while a gate is
// paused (it read the nil context's Done and panicked).
func TestCheckpointNilContextWhileGatePaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		claims := make(chan *herd.Claim, 1)
		cfg := oneClaimConfig(claims)
		gate := &herdtest.Gate{}
		herdtest.WithGate(&cfg, gate)
		m, err := herd.Join(t.Context(), memstore.New(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := <-claims
		gate.Pause()
		var nilCtx context.Context
		if err := c.Checkpoint(nilCtx, []byte("x")); err == nil {
			t.Error("Checkpoint with a nil context: nil error")
		}
		gate.Resume()
		if err := m.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
