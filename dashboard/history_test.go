package dashboard_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/dashboard"
)

// histJSON is a "history" event.
type histJSON struct {
	Full    bool  `json:"full"`
	Since   int64 `json:"since"`
	Entries []struct {
		Seq       uint64   `json:"seq"`
		At        int64    `json:"at"`
		Seen      int64    `json:"seen"`
		StoreTime bool     `json:"storeTime"`
		Kind      string   `json:"kind"`
		Session   string   `json:"session"`
		Member    string   `json:"member"`
		Parts     []string `json:"parts"`
		Count     int      `json:"count"`
		From      []string `json:"from"`
		How       []string `json:"how"`
		WaitMs    []int64  `json:"waitMs"`
	} `json:"entries"`
}

// On every backend, the history a follower keeps of a crash: the
// session's expiry with the partitions it held, then the claims of each
// by the other member, from the expired owner, with how long the
// takeover took on the store's clock (the entries carry the store's time);
// a page that opens later gets the whole ring.
func TestHistoryTakeover(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			group, ttl := uniqueGroup(t), time.Second
			a := join(t, b.rw, group, "a", herd.Numbered(8), ttl)
			m := join(t, b.rw, group, "b", nil, ttl)
			base := serve(t, dashboard.New(b.ro, dashboard.WithLogger(quiet), dashboard.WithRefresh(time.Hour)))
			waitGroup(t, base, group, 10*time.Second, func(g groupJSON) bool {
				return len(g.Members) == 2 && g.Unowned == 0 && g.Members[0].Owned == 4
			})
			evs := openEvents(t, base, group)
			var held []string // a's partitions, as its expiry says
			claimed := map[string]bool{}
			var expiredAt int64
			first := true
			a.gate.Pause() // a stops renewing: its session expires after ttl
			for deadline := time.Now().Add(ttl + 20*time.Second); len(held) == 0 || len(claimed) < len(held); {
				ev := next(t, evs, time.Until(deadline))
				if ev.name != "history" {
					continue
				}
				var h histJSON
				mustJSON(t, ev.data, &h)
				// The first: the ring (if the follower had read the
				// group when the page opened) or the follower's first
				// entry, its read of the group.
				if first {
					if len(h.Entries) == 0 || h.Entries[0].Kind != "gap" {
						t.Fatalf("first history event: full %v, entries %+v; want the ring from its gap (the first read)", h.Full, h.Entries)
					}
					first = false
				}
				for _, e := range h.Entries {
					// Every change is at the store's time, which on this
					// host is the dashboard's clock give or take the
					// follower's delay.
					if e.Kind != "gap" && (!e.StoreTime || e.At > e.Seen+50 || e.Seen-e.At > 5000) {
						t.Fatalf("history entry %+v: want the store's time (storeTime), a little before it was seen", e)
					}
					switch {
					case e.Kind == "expire" && e.Session == a.Session():
						if e.Member != "a" || e.Count != 4 || len(e.Parts) != 4 {
							t.Fatalf("a's expiry: %+v, want member a and its 4 partitions", e)
						}
						held, expiredAt = e.Parts, e.At
					case e.Kind == "claim" && e.Session == m.Session() && held != nil:
						for j, p := range e.Parts {
							if e.From[j] != "a" || e.How[j] != "expire" || e.WaitMs[j] < 0 || abs(e.At-expiredAt-e.WaitMs[j]) > 1 {
								t.Fatalf("b's claim of %s: from %q (%q) after %d ms (expiry at %d, claim at %d)", p, e.From[j], e.How[j], e.WaitMs[j], expiredAt, e.At)
							}
							claimed[p] = true
						}
						t.Logf("%s: b claimed %v, %v ms after a's expiry", b.name, e.Parts, e.WaitMs)
					}
				}
			}
			for _, p := range held {
				if !claimed[p] {
					t.Errorf("%s of a's partitions not claimed in the history", p)
				}
			}

			// A page that opens now gets the whole ring at once.
			late := openEvents(t, base, group)
			for {
				ev := next(t, late, 5*time.Second)
				if ev.name != "history" {
					continue
				}
				if !strings.Contains(ev.data, `"kind":"expire"`) || !strings.Contains(ev.data, `"full":true`) {
					t.Fatalf("a later page's first history event lacks the expiry: %.500s", ev.data)
				}
				break
			}
		})
	}
}

// With no member alive (the last one left), /api/group says so of every
// partition.
func TestNobodyRunsReasons(t *testing.T) {
	b := backends(t)[0]
	group := uniqueGroup(t)
	a := join(t, b.rw, group, "a", herd.Numbered(3), time.Second)
	base := serve(t, dashboard.New(b.ro, dashboard.WithLogger(quiet)))
	waitGroup(t, base, group, 10*time.Second, func(g groupJSON) bool { return len(g.Members) == 1 && g.Unowned == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	g := waitGroup(t, base, group, 10*time.Second, func(g groupJSON) bool { return len(g.Members) == 0 && g.Unowned == 3 })
	for _, n := range g.NobodyRuns {
		if n.Reason != "no member is alive" {
			t.Errorf("partition %s: %q, want no member is alive", n.ID, n.Reason)
		}
	}
	if code, _, _ := get(t, base+"/api/group?group="+group, ""); code != http.StatusOK {
		t.Fatalf("/api/group: %d", code)
	}
}

func abs(x int64) int64 { return max(x, -x) }
