package proctest

// A member stopped by SIGSTOP past its TTL, and Redis restarted or out: the fleet recovers.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/redisstore"
	"github.com/redis/go-redis/v9"
)

// 3. SIGSTOP one child for 3 TTLs, then SIGCONT: the others take over after
// its session expired, its old claims' checkpoints are all rejected, it
// rejoins.
func testSigstop(t *testing.T, raw *redis.Client) {
	f, members := startFleet(t, raw, "sigstop", func(string) string { return redistest.URL() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := redisstore.Open(ctx, redistest.URL(), redisstore.WithPrefix(f.prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkSigstop(t, f, members, st)
}

// checkSigstop stops c3 of a balanced fleet for 3 TTLs and checks the
// takeover, the fencing of its old claims and its return; st reads the
// group.
func checkSigstop(t *testing.T, f *fleet, members []string, st store.Store) {
	ttl := f.ttl
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	victim := "c3"
	f.mu.Lock()
	old := f.claimsOfLocked(victim)
	seq := len(f.events)
	f.mu.Unlock()
	stopAt := time.Now()
	f.signal(victim, syscall.SIGSTOP)
	f.waitStopped(victim)
	// A child stopped inside a write transaction on a shared file (SQLite)
	// holds the file's write lock, and every other process's writes wait
	// for it: that is another test (TestProcessesSQLite/sigstop-in-write).
	// Here the stop must land outside one: if it did not, let the child
	// run a moment and stop it again.
	for tries := 0; slices.ContainsFunc(f.locksOf(victim), isWriteLock); tries++ {
		if tries == 20 {
			t.Fatalf("%s holds a write lock at each of 20 stops: %q", victim, f.locksOf(victim))
		}
		t.Logf("%s was stopped holding a write lock (%q); resumed and stopped again", victim, f.locksOf(victim))
		f.signal(victim, syscall.SIGCONT)
		time.Sleep(time.Duration(1+tries) * time.Millisecond)
		stopAt = time.Now()
		f.signal(victim, syscall.SIGSTOP)
		f.waitStopped(victim)
	}
	if locks := f.locksOf(victim); len(locks) > 0 {
		t.Logf("file locks the stopped child holds (/proc/locks): %q", locks)
	}

	// When does the store expire the frozen child's session? Read the
	// group until the session is gone: the last read that still has it
	// gives a lower bound (read sent + remaining TTL), taken after any
	// renewal that was in flight at the SIGSTOP has landed.
	var expiresAfter time.Time
	f.waitFor("the stopped child's session to expire in the store", ttl+5*time.Second, func() (bool, string) {
		sent := time.Now()
		snap, err := st.Snapshot(ctx, f.group)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range snap.Sessions {
			if s.Member == victim {
				expiresAfter = sent.Add(s.Remaining)
				return false, "session still alive"
			}
		}
		return true, ""
	})
	if expiresAfter.IsZero() {
		t.Fatalf("the stopped child had no session right after SIGSTOP")
	}
	t.Logf("%s stopped; its session expired in the store %v after the SIGSTOP (at the earliest)", victim, expiresAfter.Sub(stopAt).Round(time.Millisecond))
	f.waitFor("the others to run the stopped child's partitions", ttl+5*time.Second, func() (bool, string) {
		for p := range old {
			n := 0
			for m := range f.running[p] {
				if m != victim {
					n++
				}
			}
			if n != 1 {
				return false, fmt.Sprintf("partition %s is run by %v", p, keys(f.running[p]))
			}
		}
		return true, ""
	})
	// The stop lasts 3 TTLs.
	if d := 3*ttl - time.Since(stopAt); d > 0 {
		time.Sleep(d)
	}
	contAt := time.Now()
	f.signal(victim, syscall.SIGCONT)

	f.waitFor("the resumed child's old handlers to stop", 10*time.Second, func() (bool, string) {
		for p, ep := range old {
			if r, ok := f.running[p][victim]; ok && r.epoch == ep {
				return false, fmt.Sprintf("%s still runs partition %s at its old epoch %d", victim, p, ep)
			}
		}
		return true, ""
	})
	d := f.waitBalanced("the resumed child to rejoin and the fleet to rebalance", members, 1, 15*time.Second)
	t.Logf("after SIGCONT: balanced %v later: %v", d.Round(time.Millisecond), f.counts())

	evs := f.snapshotEvents()
	var takeover []time.Duration
	successor := map[string]event{} // partition -> first start by another child after the SIGSTOP
	lastOK := map[string]uint64{}   // partition -> last checkpoint the stopped child's old claim got accepted
	rejected, fenced, canceled, inFlight := 0, 0, 0, 0
	after := contAt.UnixNano()
	for _, ev := range evs[seq:] {
		if _, ok := old[ev.Partition]; !ok {
			continue
		}
		isOld := ev.Member == victim && old[ev.Partition] == ev.Epoch
		switch {
		case ev.Ev == "start" && ev.Member != victim && ev.T < after:
			if _, seen := successor[ev.Partition]; !seen {
				successor[ev.Partition] = ev
			}
			takeover = append(takeover, time.Unix(0, ev.T).Sub(stopAt))
			if ev.T <= expiresAfter.UnixNano() {
				t.Errorf("partition %s: %s started it at %s, before the stopped child's session expired (%s)",
					ev.Partition, ev.Member, ts(ev.T), expiresAfter.Format("15:04:05.000000"))
			}
		case !isOld || !strings.HasPrefix(ev.Ev, "cp_"):
		case ev.Ev == "cp_ok":
			lastOK[ev.Partition] = max(lastOK[ev.Partition], ev.Value)
			if ev.Sent >= after {
				t.Errorf("partition %s: the resumed child's checkpoint %d at its old epoch %d, sent after SIGCONT, was accepted", ev.Partition, ev.Value, ev.Epoch)
			} else if ev.T >= after {
				inFlight++ // sent before the SIGSTOP, reply read after SIGCONT
			}
		case ev.Sent < after:
			if ev.T >= after {
				inFlight++
			}
		case ev.Ev == "cp_rejected":
			rejected++
		case ev.Ev == "cp_fenced":
			// Refused by the member before sending: on resuming it saw
			// its session past the fence time before fencing it.
			fenced++
		case ev.Ev == "cp_err":
			// Only an attempt abandoned by the handler's own context
			// (cancelled, or its one-second timeout passed across the
			// stop: nothing written) is acceptable.
			if !strings.Contains(ev.Err, "context canceled") &&
				!(strings.Contains(ev.Err, "nothing written") && strings.Contains(ev.Err, "context deadline exceeded")) {
				t.Errorf("partition %s: the resumed child's checkpoint at its old epoch %d, sent after SIGCONT, failed, neither rejected nor cancelled: %s", ev.Partition, ev.Epoch, ev.Err)
			}
			canceled++
		}
	}
	// Whatever the stopped child got accepted (even by a write in flight
	// across the SIGSTOP) happened before the takeover: the successor
	// starts from it or later.
	for p := range old {
		s, ok := successor[p]
		if !ok {
			t.Errorf("partition %s of the stopped child was not started by another child while it was stopped", p)
			continue
		}
		if s.Value < lastOK[p] {
			t.Errorf("partition %s: the stopped child's checkpoint %d was accepted, but its successor %s (epoch %d) started from %d",
				p, lastOK[p], s.Member, s.Epoch, s.Value)
		}
	}
	t.Logf("while %s was stopped the others took its %d partitions after %s from the SIGSTOP", victim, len(old), stats(takeover))
	t.Logf("checkpoints at old epochs sent after SIGCONT: %d rejected by the store, %d refused by the member (past its fence time), %d abandoned by cancellation, 0 accepted (%d more were in flight across the stop)",
		rejected, fenced, canceled, inFlight)
	// On resuming, the child finds its session past its fence time (or
	// fenced, or lost): it refuses its handlers' checkpoints itself, at
	// once, rather than send them for the store to reject by epoch.
	if rejected+fenced == 0 {
		t.Errorf("the resumed child tried no checkpoint at an old epoch after SIGCONT; the test did not exercise the fencing")
	}
	f.stopAll()
	f.checkExclusive(func(iv interval) bool {
		return iv.member == victim && old[iv.partition] == iv.epoch // the SIGSTOP window
	})
}

// 4. Redis restarts empty: the fleet recovers, epochs keep increasing and
// no checkpoint goes backwards.
func testRedisRestart(t *testing.T, raw *redis.Client) {
	srv := redistest.StartServer(t)
	f, members := startFleet(t, raw, "restart", func(string) string { return srv.URL() })
	f.mu.Lock()
	seq := len(f.events)
	f.mu.Unlock()

	killAt := time.Now()
	srv.Kill()
	srv.Start()
	upAt := time.Now()
	t.Logf("redis-server on port %d killed and restarted empty in %v", srv.Port, upAt.Sub(killAt).Round(time.Millisecond))

	checkRecovery(t, f, members, seq, killAt, upAt)
	f.stopAll()
	f.checkExclusive(nil)
}

// 5. Redis is unreachable for longer than the fence (every child fences
// itself), restarts empty meanwhile, and the children reconnect at
// different times: the first one back must not claim the others'
// partitions before they restore their checkpoints. No checkpoint goes
// backwards, no epoch is reused.
func testRedisOutage(t *testing.T, raw *redis.Client) {
	srv := redistest.StartServer(t)
	proxies := map[string]*proxy{}
	f, members := startFleet(t, raw, "outage", func(m string) string {
		p := newProxy(t, srv.Addr())
		proxies[m] = p
		return withHost(t, srv.URL(), p.Addr())
	})
	f.mu.Lock()
	seq := len(f.events)
	f.mu.Unlock()

	killAt := time.Now()
	for _, m := range members {
		proxies[m].Cut()
	}
	srv.Kill()
	srv.Start()
	upAt := time.Now()
	// The outage lasts twice the TTL: every child has fenced itself and
	// every pending restore is older than the TTL.
	time.Sleep(2*ttl - time.Since(killAt))
	proxies[members[0]].Restore()
	time.Sleep(500 * time.Millisecond)
	for _, m := range members[1:] {
		proxies[m].Restore()
	}
	t.Logf("redis-server on port %d restarted empty during a %v outage; %s reconnected first, the others 500ms later",
		srv.Port, time.Since(killAt).Round(time.Millisecond), members[0])
	checkRecovery(t, f, members, seq, killAt, upAt)
	f.stopAll()
	f.checkExclusive(nil)
}

// checkRecovery waits for the fleet to run every partition again after the
// store lost its data at killAt (back, empty, at upAt), and checks that
// every epoch after is above every epoch before, that no checkpoint at an
// old epoch sent after upAt was accepted, and that every new owner started
// from at least the last checkpoint accepted before the loss.
func checkRecovery(t *testing.T, f *fleet, members []string, seq int, killAt, upAt time.Time) {
	t.Helper()
	d := f.waitFor("the fleet to recover after the loss", 30*time.Second, func() (bool, string) {
		ok, detail := f.balancedLocked(members, 1)
		if !ok {
			return false, detail
		}
		for p, rs := range f.running {
			for _, r := range rs {
				if r.start <= killAt.UnixNano() {
					return false, fmt.Sprintf("partition %s still run by %s from before the restart (epoch %d)", p, r.member, r.epoch)
				}
			}
		}
		if time.Since(f.lastChange) < 300*time.Millisecond {
			return false, "not quiet yet; " + detail
		}
		return true, detail
	})
	t.Logf("after the loss: all %d partitions run again, balanced, %v after the store came back: %v", nPartitions, d.Round(time.Millisecond), f.counts())

	evs := f.snapshotEvents()
	oldClaims := map[claimKey]bool{}
	var maxOld uint64
	for _, ev := range evs {
		if ev.Ev == "start" && ev.T < killAt.UnixNano() {
			oldClaims[claimKey{ev.Member, ev.Partition, ev.Epoch}] = true
			maxOld = max(maxOld, ev.Epoch)
		}
	}
	lastOld := map[string]uint64{} // partition -> last checkpoint accepted before the restart
	for _, ev := range evs {
		k := claimKey{ev.Member, ev.Partition, ev.Epoch}
		if ev.Ev == "cp_ok" && oldClaims[k] {
			lastOld[ev.Partition] = max(lastOld[ev.Partition], ev.Value)
			if ev.Sent > upAt.UnixNano() {
				t.Errorf("partition %s: checkpoint %d at old epoch %d, sent after the restart, was accepted", ev.Partition, ev.Value, ev.Epoch)
			}
		}
	}
	var minNew uint64
	newStart := map[string]event{} // partition -> first start after the restart
	firstCP := map[claimKey]event{}
	for _, ev := range evs[seq:] {
		k := claimKey{ev.Member, ev.Partition, ev.Epoch}
		if oldClaims[k] {
			continue
		}
		switch ev.Ev {
		case "start":
			if minNew == 0 || ev.Epoch < minNew {
				minNew = ev.Epoch
			}
			if _, ok := newStart[ev.Partition]; !ok {
				newStart[ev.Partition] = ev
			}
		case "cp_ok":
			if _, ok := firstCP[k]; !ok {
				firstCP[k] = ev
			}
		}
	}
	t.Logf("epochs: max before the restart %d, min after %d", maxOld, minNew)
	if minNew <= maxOld {
		t.Errorf("an epoch after the restart (%d) is not greater than every epoch before it (max %d)", minNew, maxOld)
	}
	var back []string
	for p := range nPartitions {
		id := fmt.Sprint(p)
		ev, ok := newStart[id]
		if !ok {
			t.Errorf("partition %s: no start after the restart", id)
			continue
		}
		if ev.Value < lastOld[id] {
			back = append(back, fmt.Sprintf("partition %s: last checkpoint accepted before the restart %d, new owner %s (epoch %d) started from %d",
				id, lastOld[id], ev.Member, ev.Epoch, ev.Value))
		}
		if cp, ok := firstCP[claimKey{ev.Member, id, ev.Epoch}]; ok && cp.Value != ev.Value+1 {
			t.Errorf("partition %s: new owner %s started from %d but its first accepted checkpoint is %d", id, ev.Member, ev.Value, cp.Value)
		}
	}
	sort.Strings(back)
	if len(back) > 0 {
		t.Errorf("checkpoint went backwards after the restart on %d of %d partitions; e.g.\n%s",
			len(back), nPartitions, strings.Join(back[:min(10, len(back))], "\n"))
	} else {
		t.Logf("no checkpoint went backwards: every new owner started from at least the last value accepted before the restart")
	}
}
