package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/herdhq/herd"
)

// A run must neither start nor go on after the member's session has passed
// its fence time: from then on another member may own the key as soon as the
// store expires the session. herd cancels the claim's context when it
// fences the session, but that cancellation comes from the renewal
// goroutine, which a process stopped (SIGSTOP, a VM or GC pause) between the
// "running" write and the call of Run runs late, or after the run's own
// goroutine, when it resumes. Step by step, without these checks:
//
//  1. m1 writes "running slot S" (fenced, accepted) and stops;
//  2. its session expires; m2 claims the key, finds "running" and runs S;
//  3. m1 resumes; its run goroutine calls Run before the renewal goroutine
//     has noticed that the fence time passed: S runs twice at once.
//
// So the owner checks the fence time on the monotonic clock just before
// calling Run (mayStart), and Run's context ends at the fence time as
// renewals move it (fenceContext), not at a fixed bound, which would cut
// every run longer than the TTL. A stop after the check and before Run's
// first step leaves a window no check can close: a job's own writes to
// other systems are fenced with Run.Epoch.

// errFenced is the cause of a run's context cancelled at the fence time.
var errFenced = fmt.Errorf("jobs: the member's session passed its fence time (another member may own the key): %w", herd.ErrFenced)

// mayStart reports whether a run of c's key may start now: the session
// lives and its fence time has not come.
func mayStart(c *herd.Claim) bool {
	if c.SessionCause() != nil || c.Context().Err() != nil {
		return false
	}
	at := c.FenceTime()
	return at.IsZero() || time.Now().Before(at)
}

// fenceContext returns ctx, also cancelled with errFenced when c's session
// reaches its fence time. The fence time is read again whenever it comes,
// so renewals keep a long run going. stop releases the watcher and waits for
// it.
func fenceContext(ctx context.Context, c *herd.Claim) (_ context.Context, stop func()) {
	fctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tm := time.NewTimer(time.Hour)
		defer tm.Stop()
		for {
			at := c.FenceTime()
			if at.IsZero() { // a Claim made outside herd
				<-fctx.Done()
				return
			}
			d := time.Until(at)
			if d <= 0 {
				cancel(errFenced)
				return
			}
			tm.Reset(d)
			select {
			case <-fctx.Done():
				return
			case <-c.SessionDone():
				cancel(errFenced)
				return
			case <-tm.C:
			}
		}
	}()
	return fctx, func() {
		cancel(nil)
		<-done
	}
}

// fenced reports whether ctx was cancelled at the session's fence time.
func fenced(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errFenced) }
