package herd_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// TestGiveBack: the first member to run partition 3 fails there and gives
// it back (after recording a Mark); the partition goes to another member
// and stays there (it is claimed twice in all, whatever the time that
// passes), with the record marked as given back by the giver's live
// session, and the giver never runs it again while others are alive. When
// the others leave, the giver takes it back and the mark is cleared.
func TestGiveBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var (
			mu     sync.Mutex
			giver  string             // the member that gave 3 back
			starts = map[string]int{} // member -> starts of partition 3
			from   []string           // LastCheckpoint of each start of 3
		)
		join := func(name string) *herd.Member {
			m, err := herd.Join(t.Context(), st, herd.Config{
				Group: "g", Member: name, Partitions: herd.Numbered(6),
				Handler: func(c *herd.Claim) error {
					if c.Partition == "3" {
						mu.Lock()
						starts[name]++
						from = append(from, string(c.LastCheckpoint()))
						first := giver == ""
						if first {
							giver = name
						}
						mu.Unlock()
						if first {
							if err := c.Mark([]byte("progress of " + name)); err != nil {
								return err
							}
							return fmt.Errorf("the disk of %s is full: %w", name, herd.ErrGiveBack)
						}
					}
					<-c.Context().Done()
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		ms := map[string]*herd.Member{"a": join("a"), "b": join("b"), "c": join("c")}
		owner := func(p string) string {
			var who []string
			for name, m := range ms {
				if slices.Contains(m.Owned(), p) {
					who = append(who, name)
				}
			}
			if len(who) > 1 {
				t.Fatalf("partition %s is owned by %v at once", p, who)
			}
			if len(who) == 0 {
				return ""
			}
			return who[0]
		}
		record := func(p string) store.Ownership {
			snap, err := st.Snapshot(t.Context(), "g")
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range snap.Owners {
				if o.Partition == p {
					return o
				}
			}
			t.Fatalf("no record of %s", p)
			return store.Ownership{}
		}

		time.Sleep(5 * time.Second)
		mu.Lock()
		g := giver
		mu.Unlock()
		if g == "" {
			t.Fatal("nobody ran partition 3")
		}
		now := owner("3")
		if now == "" || now == g {
			t.Fatalf("partition 3 is owned by %q after %s gave it back; want another member", now, g)
		}
		if o := record("3"); o.GivenBack != ms[g].Session() || o.Member != now {
			t.Fatalf("record of 3: %+v; want owned by %s and GivenBack %q (%s's session)", o, now, ms[g].Session(), g)
		}
		for p := range 6 {
			if owner(fmt.Sprint(p)) == "" {
				t.Fatalf("partition %d is not owned", p)
			}
		}
		// No flapping: a minute of polls and renewals moves nothing. The
		// spread stays within one partition of fair (balancing may move
		// another partition to the giver, never 3).
		time.Sleep(time.Minute)
		if owner("3") != now {
			t.Fatalf("partition 3 moved from %s to %s while nothing changed", now, owner("3"))
		}
		for name, m := range ms {
			if n := len(m.Owned()); n < 1 || n > 3 {
				t.Fatalf("%s owns %v; want 2, give or take the partition kept off the giver", name, m.Owned())
			}
		}
		mu.Lock()
		if starts[g] != 1 || starts[now] != 1 || len(from) != 2 || from[1] != "progress of "+g {
			t.Fatalf("starts of partition 3: %v, resuming from %q; want one on %s, then one on %s from the giver's Mark", starts, from, g, now)
		}
		mu.Unlock()

		// The giver alone: it takes the partition back, which clears the mark.
		for name, m := range ms {
			if name != g {
				if err := m.Leave(t.Context()); err != nil {
					t.Fatal(err)
				}
				delete(ms, name)
			}
		}
		time.Sleep(5 * time.Second)
		if owner("3") != g {
			t.Fatalf("partition 3 is owned by %q with %s alone in the group; want %s", owner("3"), g, g)
		}
		if o := record("3"); o.GivenBack != "" {
			t.Fatalf("record of 3 after the giver claimed it again: %+v; want no mark", o)
		}
		if err := ms[g].Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
