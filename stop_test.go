// Tests of how handlers stop: the MaxShutdown watchdog, a Leave that times
// out, and the final checkpoint of a handler after a handoff or a lost session.

package herd_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// logCounter is a slog handler that counts the records whose message
// contains a given text, and drops every record.
type logCounter struct {
	text string
	n    *atomic.Int32
}

func (l logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l logCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, l.text) {
		l.n.Add(1)
	}
	return nil
}
func (l logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logCounter) WithGroup(string) slog.Handler      { return l }

// Handlers that return as soon as they are cancelled for a handoff never
// trigger the MaxShutdown watchdog: no "did not return within MaxShutdown"
// error, and no forced release, however long after the handoff.
func TestLeaveWatchdogQuietForPromptHandlers(t *testing.T) {
	for _, force := range []bool{false, true} {
		name := "keep"
		if force {
			name = "ForceHandoff"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var warnings atomic.Int32
				st := memstore.New()
				m, err := herd.Join(t.Context(), st, herd.Config{
					Group: "g", Member: "a", Partitions: herd.Numbered(64),
					Handler:      func(c *herd.Claim) error { <-c.Context().Done(); return nil },
					MaxShutdown:  time.Second,
					ForceHandoff: force,
					Logger:       slog.New(logCounter{text: "MaxShutdown", n: &warnings}),
				})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				if got := len(m.Owned()); got != 64 {
					t.Fatalf("owns %d partitions, want 64", got)
				}
				if err := m.Leave(t.Context()); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Second) // well past MaxShutdown
				synctest.Wait()
				if n := warnings.Load(); n != 0 {
					t.Fatalf("%d MaxShutdown warnings for 64 handlers that returned at once", n)
				}
			})
		})
	}
}

// A Leave that times out names the partitions whose handlers have not
// returned.
func TestLeaveTimeoutNamesWaitingPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stuck := make(chan struct{})
		st := memstore.New()
		m, err := herd.Join(t.Context(), st, herd.Config{
			Group: "g", Member: "a", Partitions: herd.Numbered(3),
			Handler: func(c *herd.Claim) error {
				<-c.Context().Done()
				if c.Partition != "1" {
					<-stuck // ignores cancellation
				}
				return nil
			},
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err = m.Leave(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Leave returned %v, want a deadline error", err)
		} else if !strings.Contains(err.Error(), "(2 partitions: 0 2)") {
			t.Errorf("Leave's error %q does not name partitions 0 and 2, whose handlers still run", err)
		}
		close(stuck)
		if err := m.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// A handler whose member lost its session (its store became too slow to
// renew it) and that saves its final progress with context.Background()
// gets ErrFenced at once: it returns before the session expires in the
// store, so the member that takes its partitions over never runs alongside
// it.
func TestFenceFinalCheckpointAfterSessionLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		mem := memstore.New()
		slow := faultstore.Wrap(mem)

		var mu sync.Mutex
		stopped := map[string]time.Time{} // partition -> when a's handler returned
		started := map[string]time.Time{} // partition -> when b's handler started
		finalErrs := map[string]error{}   // partition -> a's last final checkpoint's error
		handler := func(member string) herd.Handler {
			return func(c *herd.Claim) error {
				if member == "b" {
					mu.Lock()
					started[c.Partition] = time.Now()
					mu.Unlock()
					<-c.Context().Done()
					return nil
				}
				tick := time.NewTicker(700 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-tick.C:
						_ = c.Checkpoint(context.Background(), []byte("p"))
						continue
					case <-c.Context().Done():
					}
					break
				}
				err := c.Checkpoint(context.Background(), []byte("final"))
				mu.Lock()
				stopped[c.Partition] = time.Now()
				finalErrs[c.Partition] = err
				mu.Unlock()
				return nil
			}
		}
		quiet := slog.New(slog.DiscardHandler)
		a, err := herd.Join(ctx, slow, herd.Config{Group: "g", Member: "a", Partitions: herd.Numbered(8), Handler: handler("a"), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		b, err := herd.Join(ctx, mem, herd.Config{Group: "g", Member: "b", Handler: handler("b"), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		mine := a.Owned()
		if len(mine) != 4 {
			t.Fatalf("a owns %v after b joined, want 4", mine)
		}

		// Every call of a's now takes 10 s, longer than a renewal is given
		// (until the fence, SessionTTL - FenceMargin): renewals time out, a
		// fences itself, and its handlers save their final progress.
		slow.SetLatency(10 * time.Second)
		time.Sleep(herd.DefaultSessionTTL + 6*time.Second)
		synctest.Wait()
		if got := len(b.Owned()); got != 8 {
			t.Fatalf("b owns %d partitions after a's store slowed past its TTL, want 8", got)
		}
		mu.Lock()
		for _, p := range mine {
			s, ok := stopped[p]
			if !ok {
				t.Errorf("partition %s: a's handler never returned", p)
				continue
			}
			if !s.Before(started[p]) {
				t.Errorf("partition %s: b started it at %v, a's handler returned only at %v", p, started[p].Format(time.StampMilli), s.Format(time.StampMilli))
			}
		}
		for _, p := range mine {
			if err := finalErrs[p]; !errors.Is(err, herd.ErrFenced) || !errors.Is(err, herd.ErrNotOwner) {
				t.Errorf("partition %s: final checkpoint after the session was lost: %v, want ErrFenced and ErrNotOwner", p, err)
			}
		}
		mu.Unlock()
		slow.SetLatency(0)
		cancel()
		<-a.Done()
		<-b.Done()
	})
}

// After a graceful handoff (the session live, the handler's context
// cancelled) the handler's final checkpoint, made with a context of its own
// on a slow store, still goes through.
func TestFenceFinalCheckpointAfterHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		slow := faultstore.Wrap(mem)
		var mu sync.Mutex
		var errs []error
		a, err := herd.Join(t.Context(), slow, herd.Config{
			Group: "g", Member: "a", Partitions: herd.Numbered(4),
			Handler: func(c *herd.Claim) error {
				<-c.Context().Done()
				err := c.Checkpoint(context.Background(), []byte("final"))
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return nil
			},
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		slow.SetLatency(500 * time.Millisecond)
		if err := a.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(errs) != 4 {
			t.Fatalf("%d final checkpoints, want 4", len(errs))
		}
		for _, err := range errs {
			if err != nil {
				t.Errorf("final checkpoint after a handoff: %v", err)
			}
		}
		// Snapshots carry no checkpoints: read them as a successor would,
		// through Claim.
		sess, err := mem.OpenSession(t.Context(), "g", "reader", 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"0", "1", "2", "3"} {
			o, err := store.Claim(t.Context(), mem, "g", p, sess)
			if err != nil {
				t.Fatal(err)
			}
			if string(o.Checkpoint) != "final" {
				t.Errorf("partition %s: checkpoint %q, want \"final\"", p, o.Checkpoint)
			}
		}
	})
}

// A handler that ignores its cancellation for a handoff gets one
// MaxShutdown warning; with ForceHandoff its partition is released then
// (the watchdog still works after the fix that keeps it quiet otherwise).
func TestLeaveWatchdogFiresForStuckHandler(t *testing.T) {
	for _, force := range []bool{false, true} {
		name := "keep"
		if force {
			name = "ForceHandoff"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var warnings atomic.Int32
				stuck := make(chan struct{})
				st := memstore.New()
				m, err := herd.Join(t.Context(), st, herd.Config{
					Group: "g", Member: "a", Partitions: herd.Numbered(1),
					Handler:      func(c *herd.Claim) error { <-c.Context().Done(); <-stuck; return nil },
					MaxShutdown:  time.Second,
					ForceHandoff: force,
					Logger:       slog.New(logCounter{text: "MaxShutdown", n: &warnings}),
				})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
				_ = m.Leave(ctx) // times out: the handler is stuck
				cancel()
				if n := warnings.Load(); n != 1 {
					t.Errorf("%d MaxShutdown warnings for a handler stuck past it, want 1", n)
				}
				snap, err := st.Snapshot(t.Context(), "g")
				if err != nil {
					t.Fatal(err)
				}
				held := len(snap.Owners) == 1 && snap.Owners[0].Session != ""
				if held == force {
					t.Errorf("ForceHandoff %v: partition still held: %v", force, held)
				}
				close(stuck)
				if err := m.Leave(t.Context()); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
