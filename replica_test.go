package herd_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store/faultstore"
)

// TestScenarioRebalanceCostsChanges: 16 members run 2,000 partitions and 4
// more join. The members that were there read the group from their
// replicas: none reads the whole group, and each makes a handful of
// calls (its handoffs' releases, a few log reads), not one read per
// change; each newcomer reads the group once and claims its share in one
// batch. Then, at rest, a member reads nothing but its backstop read
// every PollInterval and a log read that waits.
func TestScenarioRebalanceCostsChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFleet(t, ctx, 2000)
		old := f.join(16)
		f.settle(10 * time.Second)
		f.check("16 members place 2,000 partitions", false)

		counts := func(ids []string) (c []faultstore.Counts) {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, id := range ids {
				c = append(c, f.members[id].fault.Ops())
			}
			return c
		}
		before := counts(old)
		var added []string
		f.measure("4 more join", 2*time.Second, func() { added = f.join(4) })
		after := counts(old)
		var reads, writes, feeds int64
		for i := range old {
			reads += after[i].Reads - before[i].Reads
			writes += after[i].Writes - before[i].Writes
			feeds += after[i].Feeds - before[i].Feeds
		}
		n := float64(len(old))
		t.Logf("4 joined: per member that was there, %.1f reads of the group, %.1f writes, %.1f log reads", float64(reads)/n, float64(writes)/n, float64(feeds)/n)
		if reads > 0 {
			t.Errorf("the 16 members read the whole group %d times while 400 partitions moved; want 0 (the log shows every change)", reads)
		}
		for i, c := range counts(added) {
			t.Logf("newcomer %s: %d reads of the group, %d writes, %d log reads", added[i], c.Reads, c.Writes, c.Feeds)
			if c.Reads > 1 {
				t.Errorf("newcomer %s read the group %d times; want 1", added[i], c.Reads)
			}
		}

		// At rest for a minute (PollInterval is 30 s: one backstop read
		// each; the handlers' checkpoints are writes, so writes are not
		// counted here: herd bench measures them with idle handlers).
		before = counts(f.live())
		time.Sleep(time.Minute)
		synctest.Wait()
		after = counts(f.live())
		reads, feeds = 0, 0
		for i := range after {
			reads += after[i].Reads - before[i].Reads
			feeds += after[i].Feeds - before[i].Feeds
		}
		n = float64(len(after))
		t.Logf("at rest for a minute: per member, %.1f reads of the group, %.1f log reads", float64(reads)/n, float64(feeds)/n)
		if float64(reads)/n > 2 || float64(feeds)/n > 6 {
			t.Errorf("at rest for a minute a member read the group %.1f times and the log %.1f times; want at most 2 (the backstop) and 6", float64(reads)/n, float64(feeds)/n)
		}
		for _, id := range f.live() {
			if err := f.drop(id).m.Leave(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
