package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/herdhq/herd/dashboard"
	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
)

// startJobs starts a jobs member of group running keys every second; k4's
// runs fail. It leaves when t ends.
func startJobs(t *testing.T, st store.Store, group, member string, keys []string) {
	t.Helper()
	s, err := jobs.Start(context.Background(), jobs.Config{
		Store: st, Group: group, Member: member, Keys: keys, Every: time.Second, NoSpread: true,
		SessionTTL: 2 * time.Second, Logger: quiet,
		Run: func(ctx context.Context, r jobs.Run) error {
			select {
			case <-time.After(200 * time.Millisecond): // long enough to be seen running now and then
			case <-ctx.Done():
			}
			if r.Key == "k4" {
				return errors.New("k4 fails on purpose")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatalf("starting jobs member %s: %v", member, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Leave(ctx)
	})
}

// The blackboard of a jobs group, read by the shared refresher, on every
// backend: each key with its owner, and its runs as they happen (the
// count grows from one read to a later one); k4's runs fail.
func TestJobsBlackboard(t *testing.T) {
	keys := []string{"k1", "k2", "k3", "k4"}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			group := uniqueGroup(t)
			startJobs(t, b.rw, group, "j1", keys)
			startJobs(t, b.rw, group, "j2", keys)
			base := serve(t, dashboard.New(b.ro, dashboard.WithLogger(quiet), dashboard.WithRefresh(200*time.Millisecond)))
			evs := openEvents(t, base, group)
			runs := map[string]uint64{}
			grew := map[string]bool{}
			for deadline := time.Now().Add(20 * time.Second); len(grew) < len(keys); {
				if time.Now().After(deadline) {
					t.Fatalf("runs grew on %v only, of %v", grew, keys)
				}
				r := nextRefresh(t, evs, 10*time.Second)
				if len(r.Jobs) != len(keys) {
					t.Fatalf("refresh of a jobs group with %d rows, want %d: %+v", len(r.Jobs), len(keys), r.Jobs)
				}
				for i, j := range r.Jobs {
					if j.Key != keys[i] {
						t.Fatalf("row %d is %q, want %q", i, j.Key, keys[i])
					}
					if j.Owner != "" && j.Owner != "j1" && j.Owner != "j2" {
						t.Fatalf("key %s owned by %q", j.Key, j.Owner)
					}
					if old, ok := runs[j.Key]; ok && j.Runs > old && old > 0 {
						grew[j.Key] = true
					}
					runs[j.Key] = j.Runs
				}
			}
			t.Logf("%s: runs %v", b.name, runs)
		})
	}
}

// In a real browser: the blackboard shows every key with its owner and
// runs as they happen, and its filters by key, owner and state keep the
// rows they should.
func TestBrowserJobs(t *testing.T) {
	ctx := browser(t)
	b := backends(t)[0]
	group := uniqueGroup(t)
	keys := []string{"k1", "k2", "k3", "k4"}
	startJobs(t, b.rw, group, "j1", keys)
	startJobs(t, b.rw, group, "j2", keys)
	base := serve(t, dashboard.New(b.ro, dashboard.WithLogger(quiet), dashboard.WithRefresh(200*time.Millisecond)))
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?group="+group)); err != nil {
		t.Fatal(err)
	}
	rows := `[...document.querySelectorAll("#jobTable tbody tr")]`
	waitPage(t, ctx, "the four keys, owned", rows+`.length === 4 && `+rows+`.every((r) => ["j1", "j2"].includes(r.cells[1].textContent))`, 15*time.Second)
	if n := eval[int](t, ctx, `document.querySelectorAll("button[data-action]").length`); n != 0 {
		t.Errorf("a dashboard without actions shows %d action buttons; want none", n)
	}
	runsOf := func() string {
		return eval[string](t, ctx, `document.querySelector('#jobTable tr[data-key="k1"] td.runs').textContent`)
	}
	before := runsOf()
	waitPage(t, ctx, "k1's runs growing", `document.querySelector('#jobTable tr[data-key="k1"] td.runs').textContent !== "`+before+`"`, 10*time.Second)
	waitPage(t, ctx, "k4 failed", `document.querySelector('#jobTable tr[data-key="k4"] td.result').textContent.startsWith("error: k4 fails on purpose")`, 10*time.Second)
	screenshot(t, ctx, b.name, "jobs")

	set := func(id, v string) {
		eval[bool](t, ctx, fmt.Sprintf(`(() => { const e = document.getElementById(%q); e.value = %q; e.dispatchEvent(new Event("input")); return true; })()`, id, v))
	}
	set("jobKey", "k3")
	if got := eval[[]string](t, ctx, rows+`.map((r) => r.dataset.key)`); strings.Join(got, ",") != "k3" {
		t.Errorf("key filter k3: rows %q", got)
	}
	set("jobKey", "")
	owner := eval[string](t, ctx, `document.querySelector('#jobTable tr[data-key="k1"]').cells[1].textContent`)
	set("jobOwner", owner)
	if got := eval[[]string](t, ctx, rows+`.map((r) => r.cells[1].textContent)`); len(got) == 0 || strings.Count(strings.Join(got, ","), owner) != len(got) {
		t.Errorf("owner filter %s: owners %q", owner, got)
	}
	set("jobOwner", "")
	set("jobState", "failed")
	waitPage(t, ctx, "only k4 under failed", rows+`.map((r) => r.dataset.key).join() === "k4"`, 5*time.Second)
}
