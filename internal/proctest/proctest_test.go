package proctest

import (
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/internal/redistest"
)

// The fleet of every subtest: 4 processes, 256 partitions, a 2s session TTL
// (short, to keep the test fast; the defaults derive from it: renewal every
// TTL/3, self-fencing at TTL-TTL/10).
const (
	nChildren   = 4
	nPartitions = 256
	ttl         = 2 * time.Second
)

// TestProcesses runs members as separate OS processes (this test binary
// re-executed, see TestChild) on a real Redis, and checks what they do when
// one is killed, cut off from Redis, frozen, or when Redis restarts empty.
// Everything is judged from what the handlers report (start, stop,
// checkpoint results, with timestamps), not from what the store says.
func TestProcesses(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		t.Skip("in a child process")
	}
	if testing.Short() {
		t.Skip("starts OS processes and a redis-server and takes about 25s; skipped with -short")
	}
	raw := redistest.Need(t)
	t.Run("kill9", func(t *testing.T) { testKill9(t, raw) })
	t.Run("cut", func(t *testing.T) { testCut(t, raw) })
	t.Run("sigstop", func(t *testing.T) { testSigstop(t, raw) })
	t.Run("redis-restart", func(t *testing.T) { testRedisRestart(t, raw) })
	t.Run("redis-outage", func(t *testing.T) { testRedisOutage(t, raw) })
}

// startFleet starts nChildren children c0, c1, ... in a fresh group (child
// name -> Redis URL by urlFor) and waits until they share the partitions
// evenly.
func startFleet(t *testing.T, raw *redis.Client, name string, urlFor func(member string) string) (*fleet, []string) {
	t.Helper()
	f := newFleet(t, "proctest-"+name+"-"+redistest.RandomHex(3), testPrefix(t, raw), nPartitions, ttl)
	var members []string
	for i := range nChildren {
		members = append(members, fmt.Sprintf("c%d", i))
	}
	for _, m := range members {
		f.start(m, urlFor(m))
	}
	d := f.waitBalanced("the fleet to spread the partitions", members, 0, 30*time.Second)
	t.Logf("%d processes share %d partitions evenly %v after starting", nChildren, nPartitions, d.Round(time.Millisecond))
	return f, members
}

func without(members []string, m string) []string {
	return slices.DeleteFunc(slices.Clone(members), func(x string) bool { return x == m })
}

// stats formats min / median / max of durations.
func stats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("min %v, median %v, max %v (n=%d)", r(ds[0]), r(ds[len(ds)/2]), r(ds[len(ds)-1]), len(ds))
}

// firstStarts returns, for each partition in ps, the first start event by a
// member other than not, received at or after seq and stamped after t0.
func firstStarts(evs []event, seq int, ps map[string]uint64, not string, t0 time.Time) map[string]event {
	out := map[string]event{}
	for _, ev := range evs[seq:] {
		if ev.Ev != "start" || ev.Member == not || ev.T <= t0.UnixNano() {
			continue
		}
		if _, ok := ps[ev.Partition]; !ok {
			continue
		}
		if _, seen := out[ev.Partition]; !seen {
			out[ev.Partition] = ev
		}
	}
	return out
}

// 1. kill -9 one child: the others run its partitions again within TTL+1s.
func testKill9(t *testing.T, raw *redis.Client) {
	f, members := startFleet(t, raw, "kill9", func(string) string { return redistest.URL() })
	checkKill9(t, f, members)
}

// checkKill9 kills c1 of a balanced fleet with SIGKILL and checks that the
// others run its partitions within TTL+1s, then rebalance.
func checkKill9(t *testing.T, f *fleet, members []string) {
	ttl := f.ttl
	victim := "c1"
	lost, ds, worst := f.killAndAwaitTakeover(t, victim, ttl+5*time.Second)
	t.Logf("kill -9 of %s (%d partitions, TTL %v): taken over after %s", victim, len(lost), ttl, stats(ds))
	if worst > ttl+time.Second {
		t.Errorf("the last of the killed child's partitions started elsewhere %v after the kill; want within TTL+1s = %v", worst, ttl+time.Second)
	}
	d := f.waitBalanced("the 3 survivors to rebalance", without(members, victim), 1, 10*time.Second)
	t.Logf("survivors balanced %v later: %v", d.Round(time.Millisecond), f.counts())
	f.stopAll()
	f.checkExclusive(nil)
}

// killAndAwaitTakeover kills victim with SIGKILL, waits (at most within)
// until every partition it ran runs on exactly one other child, and
// returns those partitions and, for each, how long after the kill its
// first start elsewhere came.
func (f *fleet) killAndAwaitTakeover(t *testing.T, victim string, within time.Duration) (lost map[string]uint64, ds []time.Duration, worst time.Duration) {
	t.Helper()
	f.mu.Lock()
	lost = f.claimsOfLocked(victim)
	seq := len(f.events)
	f.mu.Unlock()
	killAt := time.Now()
	f.signal(victim, syscall.SIGKILL)
	if !f.waitExit(victim, 5*time.Second) {
		t.Fatalf("%s did not die within 5s of SIGKILL", victim)
	}
	f.waitFor("the killed child's partitions to run elsewhere", within, func() (bool, string) {
		for p := range lost {
			if len(f.running[p]) != 1 {
				return false, fmt.Sprintf("partition %s is run by %v", p, keys(f.running[p]))
			}
		}
		return true, ""
	})
	first := firstStarts(f.snapshotEvents(), seq, lost, victim, killAt)
	for p := range lost {
		ev, ok := first[p]
		if !ok {
			t.Fatalf("partition %s runs elsewhere but no start event after the kill", p)
		}
		d := time.Unix(0, ev.T).Sub(killAt)
		ds, worst = append(ds, d), max(worst, d)
	}
	return lost, ds, worst
}

// cutAndAwaitFence runs cut (something that ends victim's tie while it
// lives), waits until victim has stopped every handler it ran and the
// members are balanced again, and returns, counted from the cut, when
// victim's last handler of those stopped and when the first of them started
// elsewhere (0: none yet).
func (f *fleet) cutAndAwaitFence(victim string, members []string, cut func()) (lastStop, firstStart time.Duration) {
	f.mu.Lock()
	held := f.claimsOfLocked(victim)
	seq := len(f.events)
	f.mu.Unlock()
	at := time.Now()
	cut()
	f.waitFor("the victim to stop its handlers", 5*time.Second, func() (bool, string) {
		for p, e := range held {
			if r, ok := f.running[p][victim]; ok && r.epoch == e {
				return false, fmt.Sprintf("%s still runs %s at epoch %d", victim, p, e)
			}
		}
		return true, ""
	})
	f.waitBalanced("the fleet to be balanced again", members, 1, 30*time.Second)
	for _, ev := range f.snapshotEvents()[seq:] {
		d := time.Unix(0, ev.T).Sub(at)
		_, mine := held[ev.Partition]
		switch {
		case !mine:
		case ev.Ev == "stop" && ev.Member == victim:
			lastStop = max(lastStop, d)
		case ev.Ev == "start" && (firstStart == 0 || d < firstStart):
			firstStart = d
		}
	}
	return lastStop, firstStart
}

// 2. Cut one child off from Redis for longer than its TTL: it stops its
// handlers before anyone else starts them; restored, it rejoins.
func testCut(t *testing.T, raw *redis.Client) {
	target := redisAddr(t, redistest.URL())
	proxies := map[string]*proxy{}
	f, members := startFleet(t, raw, "cut", func(m string) string {
		p := newProxy(t, target)
		proxies[m] = p
		return withHost(t, redistest.URL(), p.Addr())
	})
	checkCut(t, f, members, proxies)
}

// checkCut cuts c2 of a balanced fleet (each child connected through its
// proxy in proxies) off from the store for 1.5 TTLs and checks that it
// stops its handlers before anyone else starts them, that the others take
// over, and that restored, it rejoins and the fleet rebalances.
func checkCut(t *testing.T, f *fleet, members []string, proxies map[string]*proxy) {
	ttl := f.ttl
	victim := "c2"
	f.mu.Lock()
	lost := f.claimsOfLocked(victim)
	seq := len(f.events)
	f.mu.Unlock()

	cutAt := time.Now()
	proxies[victim].Cut()
	f.waitFor("the cut child to stop its handlers and the others to take over", ttl+10*time.Second, func() (bool, string) {
		for p := range lost {
			rs := f.running[p]
			if _, still := rs[victim]; still {
				return false, fmt.Sprintf("%s still runs partition %s", victim, p)
			}
			if len(rs) != 1 {
				return false, fmt.Sprintf("partition %s is run by %v", p, keys(rs))
			}
		}
		return true, ""
	})
	// The cut lasts longer than the TTL, whatever the takeover took.
	if d := ttl*3/2 - time.Since(cutAt); d > 0 {
		time.Sleep(d)
	}
	restoreAt := time.Now()
	proxies[victim].Restore()
	t.Logf("%s was cut off from the store for %v", victim, restoreAt.Sub(cutAt).Round(time.Millisecond))

	evs := f.snapshotEvents()
	stops := map[string]event{}
	for _, ev := range evs[seq:] {
		if ev.Ev == "stop" && ev.Member == victim && lost[ev.Partition] == ev.Epoch && ev.Epoch != 0 {
			stops[ev.Partition] = ev
		}
	}
	first := firstStarts(evs, seq, lost, victim, cutAt)
	var fence, takeover, margin []time.Duration
	bad := 0
	for p := range lost {
		stop, ok := stops[p]
		if !ok {
			t.Errorf("partition %s: no stop event from the cut child %s", p, victim)
			continue
		}
		fence = append(fence, time.Unix(0, stop.T).Sub(cutAt))
		if ev, ok := first[p]; ok {
			takeover = append(takeover, time.Unix(0, ev.T).Sub(cutAt))
			margin = append(margin, time.Duration(ev.T-stop.T))
		}
		// Every start of p by another child after the cut, not only the first.
		for _, ev := range evs[seq:] {
			if ev.Ev != "start" || ev.Partition != p || ev.Member == victim {
				continue
			}
			if !(stop.T < ev.T) || !(stop.Seq < ev.Seq) {
				bad++
				if bad <= 10 {
					t.Errorf("partition %s: %s started it (epoch %d) at %s, received #%d, but the cut child's stop is at %s, received #%d",
						p, ev.Member, ev.Epoch, ts(ev.T), ev.Seq, ts(stop.T), stop.Seq)
				}
				if bad <= 3 {
					for _, v := range evs[seq:] {
						if v.Partition == p && v.Member == victim {
							t.Logf("  %s %s epoch %d sent %s at %s %s", victim, v.Ev, v.Epoch, ts(v.Sent), ts(v.T), v.Err)
						}
					}
				}
			}
		}
	}
	t.Logf("after the cut: %s stopped its %d handlers after %s", victim, len(lost), stats(fence))
	t.Logf("after the cut: others started them after %s", stats(takeover))
	t.Logf("margin between the cut child's stop and the next start, per partition: %s", stats(margin))
	if bad > 0 {
		t.Errorf("%d starts by other children came before the cut child's stop", bad)
	}

	d := f.waitBalanced("the restored child to rejoin and the fleet to rebalance", members, 1, 15*time.Second)
	t.Logf("after the restore: balanced %v later: %v", d.Round(time.Millisecond), f.counts())
	f.stopAll()
	f.checkExclusive(nil)
}
