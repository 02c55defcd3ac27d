package herd_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// A handoff cancels the claim's context but not its session: SessionDone
// stays open while the handler finishes, and closes (ErrLeft) when the
// Leave is over.
func TestSessionDoneOpenDuringHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		claims := make(chan *herd.Claim, 1)
		openAtCancel := make(chan bool, 1)
		a, err := herd.Join(t.Context(), memstore.New(), herd.Config{
			Group: "g", Member: "a", Partitions: herd.Numbered(1), Logger: slog.New(slog.DiscardHandler),
			Handler: func(c *herd.Claim) error {
				claims <- c
				<-c.Context().Done()
				select {
				case <-c.SessionDone():
					openAtCancel <- false
				default:
					openAtCancel <- true
				}
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		c := <-claims
		if err := a.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !<-openAtCancel {
			t.Fatal("SessionDone closed when the handler was cancelled for a handoff")
		}
		<-c.SessionDone()
		if err := c.SessionCause(); !errors.Is(err, herd.ErrLeft) {
			t.Fatalf("SessionCause after Leave = %v; want ErrLeft", err)
		}
	})
}

// A handler still finishing after a handoff learns through SessionDone
// that its session was fenced (the store became unreachable), before the
// store could expire the session.
func TestSessionDoneFencedDuringHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := faultstore.Wrap(memstore.New())
		const ttl = 3 * time.Second
		fencedAfter := make(chan time.Duration, 1)
		a, err := herd.Join(t.Context(), st, herd.Config{
			Group: "g", Member: "a", Partitions: herd.Numbered(1), SessionTTL: ttl,
			MaxShutdown: time.Hour, Logger: slog.New(slog.DiscardHandler),
			Handler: func(c *herd.Claim) error {
				<-c.Context().Done()
				began := time.Now()
				<-c.SessionDone() // a child process in its SIGTERM grace, say
				if !errors.Is(c.SessionCause(), herd.ErrFenced) {
					t.Errorf("SessionCause = %v; want ErrFenced", c.SessionCause())
				}
				fencedAfter <- time.Since(began)
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		st.SetCut(true)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		leaveErr := make(chan error, 1)
		go func() { leaveErr <- a.Leave(ctx) }()
		if d := <-fencedAfter; d >= ttl {
			t.Fatalf("SessionDone closed %v after the handoff began; want before the TTL %v", d, ttl)
		}
		st.SetCut(false)
		<-leaveErr
	})
}
