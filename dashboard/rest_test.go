package dashboard_test

import (
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/dashboard"
	"github.com/herdhq/herd/store/faultstore"
)

// restOps is what the dashboard's store calls cost while a group is at
// rest, counted between two refresh events a page received.
type restOps struct {
	ops     int64 // store calls of every kind
	cycles  int   // refresh reads in between
	elapsed time.Duration
	// spaced is whether a read was slow enough (a loaded machine or
	// server) that the refresher waited longer than its period after it.
	spaced bool
}

func (r restOps) perSecond() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// measureRest counts the store calls of fs from one refresh event of page
// to the cycles-th after it.
func measureRest(t *testing.T, fs *faultstore.Store, page <-chan sseEvent, cycles int, period time.Duration) restOps {
	t.Helper()
	count := func() int64 { c := fs.Ops(); return c.Reads + c.Feeds + c.Writes }
	first := nextRefresh(t, page, time.Minute)
	start, before := time.Now(), count()
	seq, spaced := first.Seq, false
	for seq < first.Seq+cycles {
		r := nextRefresh(t, page, time.Minute)
		seq, spaced = r.Seq, spaced || r.NextMs > period.Milliseconds()
	}
	return restOps{ops: count() - before, cycles: seq - first.Seq, elapsed: time.Since(start), spaced: spaced || first.NextMs > period.Milliseconds()}
}

// The store calls of a group at rest do not depend on the number of pages
// open on it: with 1 page and with 20 (plain HTTP clients of the event
// stream the page uses), the dashboard makes the same calls per refresh
// period, the shared refresher's read (a Snapshot and the Records of the
// set); its follower waits in Changes. Counted on every backend by a
// counting wrapper; the figures are in docs/dashboard.md.
func TestStoreOpsAtRestIndependentOfPages(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) { storeOpsAtRest(t, b) })
	}
}

func storeOpsAtRest(t *testing.T, b backend) {
	const parts, refresh, cycles = 100, time.Second, 5
	group := uniqueGroup(t)
	join(t, b.rw, group, "a", herd.Numbered(parts), 2*time.Second)
	fs := faultstore.Wrap(b.ro)
	base := serve(t, dashboard.New(fs, dashboard.WithLogger(quiet), dashboard.WithRefresh(refresh)))
	waitGroup(t, base, group, 10*time.Second, func(g groupJSON) bool { return len(g.Members) == 1 && g.Unowned == 0 })

	first := openEvents(t, base, group)
	nextRefresh(t, first, time.Minute) // the follower and the refresher are running
	one := measureRest(t, fs, first, cycles, refresh)

	for range 19 {
		p := openEvents(t, base, group)
		for ev := next(t, p, 10*time.Second); ev.name != "state"; ev = next(t, p, 10*time.Second) {
		}
	}
	twenty := measureRest(t, fs, first, cycles, refresh)

	t.Logf("%s at rest, refresh every %v, %d partitions: 1 page %d store calls in %d refreshes over %v (%.2f/s); 20 pages %d in %d over %v (%.2f/s)",
		b.name, refresh, parts, one.ops, one.cycles, one.elapsed.Round(time.Millisecond), one.perSecond(),
		twenty.ops, twenty.cycles, twenty.elapsed.Round(time.Millisecond), twenty.perSecond())
	// Between two refresh events a page received, the reads of exactly
	// that many refreshes were made: the same calls per refresh, whatever
	// the pages (one more allowed for a follower's Changes returning).
	perOne, perTwenty := float64(one.ops)/float64(one.cycles), float64(twenty.ops)/float64(twenty.cycles)
	if one.ops == 0 || perTwenty > perOne+1.0/cycles || perTwenty < perOne-1.0/cycles {
		t.Errorf("store calls per refresh: %.2f with 1 page, %.2f with 20; want the same", perOne, perTwenty)
	}
	// And per second, within a refresh period's worth of calls, unless a
	// slow read spaced the refreshes out (the rate then follows the
	// reads' speed, not the pages).
	if one.spaced || twenty.spaced {
		t.Logf("%s: a read slower than a fifth of the period spaced the refreshes out: calls per second not compared", b.name)
	} else if d := twenty.perSecond() - one.perSecond(); d > perOne/refresh.Seconds()/cycles || -d > perOne/refresh.Seconds()/cycles {
		t.Errorf("store calls per second: %.2f with 1 page, %.2f with 20; want the same within one refresh's calls over the window", one.perSecond(), twenty.perSecond())
	}
}
