package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/dashboard"
)

// The time from navigation to the full map of a 100,000-partition group
// drawn, with its 10 members running on Redis: docs/dashboard.md quotes
// it. It runs only when HERD_DASHBOARD_LARGE=1 (the placement loads the
// machine for a while):
//
//	HERD_DASHBOARD_LARGE=1 go test -count=1 -v -run TestBrowserLargeMap ./dashboard/
func TestBrowserLargeMap(t *testing.T) {
	if os.Getenv("HERD_DASHBOARD_LARGE") != "1" {
		t.Skip("set HERD_DASHBOARD_LARGE=1 to measure the map of 100,000 partitions")
	}
	const n, members = 100_000, 10
	ctx := browser(t)
	b := backends(t)[1] // Redis
	group := uniqueGroup(t)
	join(t, b.rw, group, "m00", herd.Numbered(n), 10*time.Second)
	for i := 1; i < members; i++ {
		join(t, b.rw, group, fmt.Sprintf("m%02d", i), nil, 10*time.Second)
	}
	base := serve(t, dashboard.New(b.ro, dashboard.WithLogger(quiet)))
	waitGroup(t, base, group, 5*time.Minute, func(g groupJSON) bool {
		if len(g.Members) != members || g.Unowned != 0 {
			return false
		}
		for _, m := range g.Members {
			if m.Owned != n/members {
				return false
			}
		}
		return true
	})
	// Cold: a dashboard of its own, whose follower reads the group when
	// the page opens. Warm: another page (an event stream of the test's)
	// already follows the group.
	for run := range 5 {
		h := dashboard.New(b.ro, dashboard.WithLogger(quiet))
		base := serve(t, h)
		measureMap(t, ctx, base, group, fmt.Sprintf("run %d, cold", run+1))
		openEvents(t, base, group)
		measureMap(t, ctx, base, group, fmt.Sprintf("run %d, warm", run+1))
		h.Close()
	}
}

// measureMap navigates to the group's page and logs when its map was
// drawn, and what it cost.
func measureMap(t *testing.T, ctx context.Context, base, group, what string) {
	t.Helper()
	const n, members = 100_000, 10
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(base+"/?group="+group)); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the map of every partition", fmt.Sprintf(
		`window.herdDash && herdDash.mapDrawnAt > 0 && document.getElementById("unownedCount").textContent === "(0)" && document.querySelectorAll("#members tbody tr").length === %d`, members), time.Minute)
	state := eval[float64](t, ctx, `herdDash.stateAt`)
	drawn := eval[float64](t, ctx, `herdDash.mapDrawnAt`)
	render := eval[float64](t, ctx, `herdDash.renderMs`)
	cells := eval[int](t, ctx, `(() => { const c = document.getElementById("map"); return c.width * c.height; })()`)
	tm := eval[struct {
		DecodeMs float64 `json:"decodeMs"`
		DrawMs   float64 `json:"drawMs"`
		Bytes    int     `json:"bytes"`
		ReadMs   float64 `json:"serverReadMs"`
	}](t, ctx, `herdDash.timings || {}`)
	evs := eval[[]struct {
		Name  string  `json:"name"`
		At    float64 `json:"at"`
		Ms    float64 `json:"ms"`
		Bytes int     `json:"bytes"`
	}](t, ctx, `herdDash.events`)
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, " %s at %.0f (%.0f ms, %d bytes);", e.Name, e.At, e.Ms, e.Bytes)
	}
	t.Logf("%s: loads: %s", what, eval[string](t, ctx, `performance.getEntries().filter((e) => e.entryType === "navigation" || e.entryType === "resource").map((e) => e.name.replace(/^.*\//, "") + " " + Math.round(e.startTime) + "-" + Math.round(e.responseStart) + (e.name.includes("api/events") ? "" : "-" + Math.round(e.responseEnd))).join(", ")`))
	t.Logf("%s: events:%s first render: %s", what, b.String(), eval[string](t, ctx, `JSON.stringify((herdDash.timings && herdDash.timings.parts) || null)`))
	t.Logf("%s: %d partitions, %d members: state received %.0f ms and map drawn %.0f ms after navigation; "+
		"the dashboard's snapshot read took %.0f ms; the state event %d bytes, decoded in %.1f ms, first draw %.1f ms; one full redraw %.1f ms; canvas %d pixels",
		what, n, members, state, drawn, tm.ReadMs, tm.Bytes, tm.DecodeMs, tm.DrawMs, render, cells)
}
