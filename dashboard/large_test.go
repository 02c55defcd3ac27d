package dashboard_test

import (
	"fmt"
	"os"
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
	for run := range 5 {
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(base+"/#group="+group)); err != nil {
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
		}](t, ctx, `herdDash.timings`)
		t.Logf("run %d: %d partitions, %d members: state received %.0f ms and map drawn %.0f ms after navigation; "+
			"the dashboard read the snapshot in %.0f ms; the state event %d bytes, decoded in %.1f ms, first draw %.1f ms; one full redraw %.1f ms; canvas %d pixels",
			run+1, n, members, state, drawn, tm.ReadMs, tm.Bytes, tm.DecodeMs, tm.DrawMs, render, cells)
	}
}
