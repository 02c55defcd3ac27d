package herd_test

// The fault test's steps: a random fault, then waiting for the fleet to be quiet and settled, and what it measured.

import (
	"context"
	"log/slog"
	"os"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/internal/tracker"
)

// fault applies one random fault or membership change.
func (f *faultFleet) fault(dataLoss bool) {
	n := len(f.members)
	switch f.rng.IntN(12) {
	case 0:
		if n < faultMaxSize {
			f.join(1 + f.rng.IntN(2))
		}
	case 1:
		// A stalled process cannot call Leave: leave a running member.
		if id, fm := f.pick(); n > 1 && !fm.paused {
			f.leave(id)
		}
	case 2:
		if n > 1 {
			id, _ := f.pick()
			f.crash(id)
		}
	case 3, 4:
		id, fm := f.pick()
		f.setPause(id, fm, !fm.paused)
		f.noteFaults(id, fm)
		f.logf("%s paused: %v", id, fm.paused)
	case 5:
		id, fm := f.pick()
		fm.cut = !fm.cut
		fm.fault.SetCut(fm.cut)
		f.noteFaults(id, fm)
		f.logf("%s cut: %v", id, fm.cut)
	case 6, 7, 8, 9:
		id, fm := f.pick()
		// None, a little, or more than the renewal timeout (3.3 s):
		// renewals then fail until the member fences itself.
		var d time.Duration
		switch f.rng.IntN(3) {
		case 1:
			d = time.Duration(1+f.rng.IntN(500)) * time.Millisecond
		case 2:
			d = time.Duration(1000+f.rng.IntN(5000)) * time.Millisecond
		}
		fm.fault.SetLatency(d)
		fm.lat = d
		f.noteFaults(id, fm)
		f.logf("%s latency %v", id, d)
	case 10:
		id, fm := f.pick()
		p := 0.0
		if f.rng.IntN(2) > 0 {
			p = f.rng.Float64() * 0.3
		}
		fm.fault.SetFailureRate(p)
		fm.fail = p
		f.noteFaults(id, fm)
		f.logf("%s failure rate %.2f", id, p)
	case 11:
		if dataLoss && f.rng.IntN(4) == 0 {
			// The hook for store data loss: the store forgets everything,
			// as a Redis restarted without persistence does.
			f.st.Wipe()
			f.chk.lose()
			f.logf("the store loses its data")
		}
	}
}

// quiet clears every fault, waits for graceful leaves to end and for the
// fleet to be balanced over its members, and checks.
func (f *faultFleet) quiet(step string) {
	f.t.Helper()
	for _, id := range f.ids() {
		fm := f.members[id]
		if fm.paused {
			f.setPause(id, fm, false)
		}
		fm.cut = false
		fm.fault.SetCut(false)
		fm.fault.SetLatency(0)
		fm.fault.SetFailureRate(0)
		fm.lat, fm.fail = 0, 0
		f.noteFaults(id, fm)
	}
	f.logf("%s: quiet", step)
	f.leaving.Wait()
	f.settle(step, 4*faultTTL)
	f.check()
}

func (f *faultFleet) settle(step string, limit time.Duration) {
	f.t.Helper()
	if f.skewed {
		f.settleRunning(step, limit)
		return
	}
	ctx, cancel := context.WithTimeout(f.ctx, limit)
	defer cancel()
	if err := f.tr.WaitBalanced(ctx, f.parts, f.ids()); err != nil {
		f.failNow("%s: not balanced after %v: %v", step, limit, err)
	}
	synctest.Wait()
	f.logf("%s: balanced", step)
}

// measured makes one clean change and checks it moved the minimum.
func (f *faultFleet) measured() {
	f.t.Helper()
	// Sessions that a fault left behind in the store (a member fenced
	// early closes its old session only once its handlers returned) are
	// gone within a TTL: wait, so that the change below is the only one.
	f.sleep(faultTTL)
	f.settle("before the change", faultTTL)
	before := f.tr.Owners()
	f.tr.Reset()
	var what string
	switch n := len(f.members); {
	case n < faultMaxSize && f.rng.IntN(3) == 0:
		what = "join"
		f.join(1 + f.rng.IntN(2))
	case n > 1 && f.rng.IntN(2) == 0:
		what = "leave"
		id, _ := f.pick()
		f.leave(id)
		f.leaving.Wait()
	case n > 1 && f.rng.IntN(2) == 0:
		what = "crash"
		id, _ := f.pick()
		f.crash(id)
	default:
		what = "more partitions"
		f.setPartitions(len(f.parts) + 1 + f.rng.IntN(8))
		f.logf("%d partitions", len(f.parts))
	}
	f.settle(what, 2*faultTTL)
	f.check()
	if got, want := f.tr.Moves(), tracker.MinMoves(f.parts, before, f.ids()); got != want {
		f.failNow("%s: %d partitions moved, the minimum is %d", what, got, want)
	}
}

func faultLogger(id string) *slog.Logger {
	if os.Getenv("HERD_FAULT_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("m", id)
	}
	return slog.New(slog.DiscardHandler)
}
