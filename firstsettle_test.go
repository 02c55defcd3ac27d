package herd

import (
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// TestStartQuiet: the quiet period before a first placement grows with how
// long the fleet's start has lasted so far, from JoinSettle for sessions
// opened together to firstSettle x JoinSettle, and to firstSettle times
// the longest pause between two openings, never above SessionTTL/10 (nor
// below JoinSettle).
func TestStartQuiet(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		settle, limit, span, gap, want time.Duration
	}{
		{100 * ms, time.Second, 0, 0, 100 * ms},        // opened together
		{100 * ms, time.Second, -5 * ms, 0, 100 * ms},  // clocks aside, no less
		{100 * ms, time.Second, 5 * ms, 0, 110 * ms},   // a burst
		{100 * ms, time.Second, 48 * ms, 0, 196 * ms},  // trickling in
		{100 * ms, time.Second, 100 * ms, 0, 300 * ms}, // spread over JoinSettle
		{100 * ms, time.Second, time.Hour, 0, 300 * ms},
		{100 * ms, 200 * ms, time.Hour, 0, 200 * ms}, // SessionTTL/10 caps it
		{100 * ms, 50 * ms, time.Hour, 0, 100 * ms},  // but JoinSettle is the least
		{10 * ms, time.Second, 5 * ms, 0, 20 * ms},
		{100 * ms, time.Second, 100 * ms, 20 * ms, 300 * ms},   // short pauses: by the span
		{100 * ms, time.Second, 100 * ms, 150 * ms, 450 * ms},  // a long pause
		{100 * ms, time.Second, 5 * ms, 400 * ms, time.Second}, // SessionTTL/10 caps it
		{100 * ms, 50 * ms, 5 * ms, 400 * ms, 100 * ms},        // but JoinSettle is the least
	} {
		if got := startQuiet(c.settle, c.limit, c.span, c.gap); got != c.want {
			t.Errorf("startQuiet(%v, %v, %v, %v) = %v; want %v", c.settle, c.limit, c.span, c.gap, got, c.want)
		}
	}
}

// readOfSessions is a read of the group whose sessions have these
// Remaining (0: one the log brought).
func readOfSessions(rem ...time.Duration) *store.Snapshot {
	snap := &store.Snapshot{}
	for i, r := range rem {
		snap.Sessions = append(snap.Sessions, store.SessionInfo{ID: fmt.Sprint(i), Remaining: r})
	}
	return snap
}

// TestStartSpan: the span of a fleet's start, as a member knows it: the
// spread of the opening times of the sessions in its read (by their
// Remaining), plus the time from its own opening to the last news of one
// the log brought (those have no Remaining).
func TestStartSpan(t *testing.T) {
	const ms = time.Millisecond
	opened := time.Now()
	ttl := 10 * time.Second
	for _, c := range []struct {
		name string
		snap *store.Snapshot
		last time.Time
		want time.Duration
	}{
		{"alone", readOfSessions(ttl), opened.Add(50 * ms), time.Duration(math.MaxInt64)},
		{"read together", readOfSessions(ttl, ttl-2*ms, ttl-ms), opened.Add(50 * ms), 2 * ms},
		{"read over 48 ms", readOfSessions(ttl-48*ms, ttl, ttl-12*ms), opened.Add(5 * ms), 48 * ms},
		{"logged after", readOfSessions(ttl, 0, 0), opened.Add(36 * ms), 36 * ms},
		{"both", readOfSessions(ttl-10*ms, ttl, 0), opened.Add(20 * ms), 30 * ms},
		{"news before the opening", readOfSessions(ttl, 0), opened.Add(-ms), 0},
	} {
		if got := startSpan(c.snap, opened, c.last); got != c.want {
			t.Errorf("%s: startSpan = %v; want %v", c.name, got, c.want)
		}
	}
}

// TestStartGap: the longest pause of a fleet's start, as a member knows
// it: between the openings of the sessions in its read (by their
// Remaining), and between two news of openings the feed brought.
func TestStartGap(t *testing.T) {
	const ms = time.Millisecond
	ttl := 10 * time.Second
	for _, c := range []struct {
		name    string
		snap    *store.Snapshot
		newsGap time.Duration
		want    time.Duration
	}{
		{"alone", readOfSessions(ttl), 0, 0},
		{"read together", readOfSessions(ttl, ttl-2*ms, ttl-ms), 0, ms},
		{"read over 48 ms", readOfSessions(ttl-48*ms, ttl, ttl-12*ms), 0, 36 * ms},
		{"logged after", readOfSessions(ttl, 0, 0), 36 * ms, 36 * ms},
		{"a pause in the read", readOfSessions(ttl, ttl-5*ms, ttl-195*ms, ttl-200*ms, 0), 3 * ms, 190 * ms},
	} {
		if got := startGap(c.snap, c.newsGap); got != c.want {
			t.Errorf("%s: startGap = %v; want %v", c.name, got, c.want)
		}
	}
}

// TestFirstPlacementWaitsOutLongPauses: a fleet whose start pauses, and
// then pauses longer (as 100 processes on two cores do while the first
// members read the group), places the partitions once. a to e open their
// sessions 10 ms apart, f 170 ms later and g 400 ms after f: quiet for
// firstSettle x JoinSettle after f, a to f claimed every partition before
// g came, and handed a seventh over to it.
func TestFirstPlacementWaitsOutLongPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &claimCount{Store: memstore.New()}
		var ms []*Member
		for i, pause := range []time.Duration{0, 10, 10, 10, 10, 170, 400} {
			time.Sleep(pause * time.Millisecond)
			ms = append(ms, joinIdle(t, st, string(rune('a'+i)), 42))
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		for _, m := range ms {
			if n := len(m.Owned()); n != 6 {
				t.Errorf("%s runs %d of 42 partitions; want 6", m.cfg.Member, n)
			}
		}
		if n := st.n.Load(); n != 42 {
			t.Errorf("%d claims for 42 partitions: %d moved", n, n-42)
		}
		for _, m := range ms {
			if err := m.Leave(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestFirstPlacementTogether: members that open their sessions together
// place the partitions JoinSettle after, not firstSettle x JoinSettle.
func TestFirstPlacementTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &claimCount{Store: memstore.New()}
		start := time.Now()
		ms := []*Member{joinIdle(t, st, "a", 40), joinIdle(t, st, "b", 40), joinIdle(t, st, "c", 40), joinIdle(t, st, "d", 40)}
		time.Sleep(DefaultJoinSettle + DefaultJoinSettle/2)
		synctest.Wait()
		owned := 0
		for _, m := range ms {
			owned += len(m.Owned())
		}
		if owned != 40 {
			t.Errorf("%v after 4 members opened their sessions together, %d of 40 partitions run; want all", time.Since(start), owned)
		}
		if n := st.n.Load(); n != int64(owned) {
			t.Errorf("%d claims for %d partitions", n, owned)
		}
		for _, m := range ms {
			if err := m.Leave(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestFirstPlacementLoneWaits: the first member of a fleet, alone in the
// group, does not place every partition as soon as it can while the next
// member's process is still starting: b joins 200 ms after a, and each
// partition is claimed once. Placing alone at JoinSettle (150 ms, when its
// first call to the log came back empty), a claimed all 40 and handed 20
// over to b.
func TestFirstPlacementLoneWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &claimCount{Store: memstore.New()}
		a := joinIdle(t, st, "a", 40)
		time.Sleep(200 * time.Millisecond)
		b := joinIdle(t, st, "b", 40)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if na, nb := len(a.Owned()), len(b.Owned()); na != 20 || nb != 20 {
			t.Errorf("a runs %d and b %d of 40 partitions; want 20 each", na, nb)
		}
		if n := st.n.Load(); n != 40 {
			t.Errorf("%d claims for 40 partitions: %d moved", n, n-40)
		}
		for _, m := range []*Member{a, b} {
			if err := m.Leave(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}
