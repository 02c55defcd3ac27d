package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// waitUntil polls cond until it holds, failing the test after within.
func (e *env) waitUntil(within time.Duration, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("waited %v for %s; it did not happen", within, what)
		}
		select {
		case <-time.After(time.Millisecond):
		case <-e.ctx.Done():
			e.t.Fatalf("waiting for %s: %v", what, e.ctx.Err())
		}
	}
}

// testClaimRaceNew: 20 sessions race to claim 50 partitions that have no
// record yet; each partition is won by exactly one session, the losers get
// ErrClaimed, and the snapshot agrees with the winners.
func testClaimRaceNew(e *env) {
	t := e.t
	const nSessions, nPartitions = 20, 50
	parts := make([]string, nPartitions)
	for i := range parts {
		parts[i] = fmt.Sprintf("p%02d", i)
	}
	e.setPartitions(parts...)
	sessions := make([]string, nSessions)
	for i := range sessions {
		sessions[i] = e.open(fmt.Sprintf("member-%02d", i), longTTL)
	}

	var mu sync.Mutex
	winners := map[string][]store.Ownership{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() {
			order := append([]string(nil), parts...)
			rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			<-start
			for _, p := range order {
				o, err := store.Claim(e.ctx, e.s, e.group, p, s)
				switch {
				case err == nil:
					mu.Lock()
					winners[p] = append(winners[p], o)
					mu.Unlock()
				case errors.Is(err, store.ErrClaimed):
				default:
					t.Errorf("Claim(%q, %q) in a race: %v; want success or ErrClaimed", p, s, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	snap := e.snap()
	for _, p := range parts {
		w := winners[p]
		if len(w) != 1 {
			var who []string
			for _, o := range w {
				who = append(who, o.Session)
			}
			t.Fatalf("partition %q was claimed successfully by %d sessions %q in a race; want exactly one", p, len(w), who)
		}
		got, _ := findOwner(snap, p)
		if !sameOwner(got, w[0]) {
			t.Fatalf("record of %q is %s; want the winner's %s", p, fmtOwner(got), fmtOwner(w[0]))
		}
	}
}

// testClaimRaceFreed: round after round, the owner releases (or closes its
// session) and 20 sessions race to claim the freed record: exactly one wins
// each round, with an epoch above the previous round's.
func testClaimRaceFreed(e *env) {
	t := e.t
	const nSessions, rounds = 20, 12
	sessions := make([]string, nSessions)
	for i := range sessions {
		sessions[i] = e.open(fmt.Sprintf("member-%02d", i), longTTL)
	}
	owner := e.claim("p", sessions[0])
	for round := range rounds {
		if round%3 == 2 {
			// The owner's session ends instead; replace it.
			e.close(owner.Session)
			for i, s := range sessions {
				if s == owner.Session {
					sessions[i] = e.open(fmt.Sprintf("member-%02d-r%d", i, round), longTTL)
				}
			}
		} else {
			e.release("p", owner.Session, owner.Epoch)
		}
		var mu sync.Mutex
		var wins []store.Ownership
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, s := range sessions {
			wg.Go(func() {
				<-start
				o, err := store.Claim(e.ctx, e.s, e.group, "p", s)
				switch {
				case err == nil:
					mu.Lock()
					wins = append(wins, o)
					mu.Unlock()
				case errors.Is(err, store.ErrClaimed):
				default:
					t.Errorf("round %d: Claim(%q) in a race: %v; want success or ErrClaimed", round, s, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
		if len(wins) != 1 {
			t.Fatalf("round %d: %d sessions claimed the freed partition: %v; want exactly one", round, len(wins), wins)
		}
		if wins[0].Epoch <= owner.Epoch {
			t.Fatalf("round %d: the winner got epoch %d after %d; want strictly increasing epochs", round, wins[0].Epoch, owner.Epoch)
		}
		owner = wins[0]
	}
}

// testStaleCheckpoints: while the owner of a partition keeps writing
// checkpoints from many goroutines, its ownership ends (by Release, or by
// closing its session) and another session takes over and writes. No write
// with the old epoch is accepted once the ownership ended, and the final
// checkpoint is the new owner's last write.
func testStaleCheckpoints(e *env) {
	a1 := e.open("old-owner-1", longTTL)
	a2 := e.open("old-owner-2", longTTL)
	b := e.open("new-owner", longTTL)
	e.raceStale("released", a1, b, func(epoch uint64) { e.release("released", a1, epoch) })
	e.raceStale("closed", a2, b, func(uint64) { e.close(a2) })
}

func (e *env) raceStale(p, a, b string, end func(epoch uint64)) {
	t := e.t
	t.Helper()
	oa := e.claim(p, a)
	e.checkpoint(p, oa.Epoch, "a-start")

	const writers = 8
	var ended, stop atomic.Bool
	var attempts, afterEnd atomic.Int64
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }()
	for w := range writers {
		wg.Go(func() {
			for i := 0; !stop.Load() && e.ctx.Err() == nil; i++ {
				wasEnded := ended.Load()
				err := e.s.Checkpoint(e.ctx, e.group, p, oa.Epoch, fmt.Appendf(nil, "a-%d-%d", w, i))
				attempts.Add(1)
				switch {
				case err == nil && wasEnded:
					t.Errorf("partition %q: Checkpoint with epoch %d was accepted after that ownership ended; want ErrNotOwner", p, oa.Epoch)
					return
				case err != nil && !errors.Is(err, store.ErrNotOwner):
					t.Errorf("partition %q: Checkpoint by the old owner: %v; want nil or ErrNotOwner", p, err)
					return
				}
				if wasEnded {
					afterEnd.Add(1)
				}
			}
		})
	}
	e.waitUntil(5*time.Second, "the old owner's writers to start", func() bool { return attempts.Load() >= writers*5 })
	end(oa.Epoch)
	ended.Store(true)

	ob := e.claim(p, b)
	if ob.Epoch <= oa.Epoch {
		t.Fatalf("partition %q: the new owner got epoch %d; want more than the old %d", p, ob.Epoch, oa.Epoch)
	}
	if !strings.HasPrefix(string(ob.Checkpoint), "a-") {
		t.Fatalf("partition %q: the new owner got checkpoint %q; want the old owner's last write", p, ob.Checkpoint)
	}
	var last string
	for i := range 20 {
		last = fmt.Sprintf("b-%d", i)
		e.checkpoint(p, ob.Epoch, last)
	}
	e.waitUntil(10*time.Second, "the old owner's writers to try again after the takeover",
		func() bool { return afterEnd.Load() >= writers*10 || t.Failed() })
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		return
	}
	e.wantCheckpoint(p, b, last, "after stale writers raced with the new owner")
}
