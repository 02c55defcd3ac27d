package dashboard_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/dashboard"
	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
)

// startHourly starts a jobs member of group whose keys are due every hour
// on the hour (so, in a test, never: a run shows only when asked for).
func startHourly(t *testing.T, st store.Store, group, member string, keys []string) *jobs.Scheduler {
	t.Helper()
	s, err := jobs.Start(context.Background(), jobs.Config{
		Store: st, Group: group, Member: member, Keys: keys, Every: time.Hour, NoSpread: true,
		SessionTTL: 2 * time.Second, Logger: quiet,
		Run: func(ctx context.Context, r jobs.Run) error { return nil },
	})
	if err != nil {
		t.Fatalf("starting jobs member %s: %v", member, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Leave(ctx)
	})
	return s
}

// In a real browser, on every backend, a dashboard with actions and a
// token: the page shows the buttons; clicking "run now" on a key due
// only every hour makes its run show on the blackboard; "pause" shows the
// key paused and "resume" undoes it; "leave" on a member makes it leave
// gracefully, its keys taken over by the other. A request without the
// token is refused.
func TestBrowserActions(t *testing.T) {
	ctx := browser(t)
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			group := uniqueGroup(t)
			keys := []string{"h1", "h2"}
			j1 := startHourly(t, b.rw, group, "j1", keys)
			startHourly(t, b.rw, group, "j2", keys)
			const token = "tok-browser-5b7e"
			base := serve(t, dashboard.New(b.rw, dashboard.WithActions(), dashboard.WithToken(token),
				dashboard.WithLogger(quiet), dashboard.WithRefresh(200*time.Millisecond)))
			if code, _ := post(t, base, `{"group":"`+group+`","action":"run","key":"h1"}`, "Content-Type", "application/json"); code != http.StatusUnauthorized {
				t.Errorf("an action without the token: %d, want 401", code)
			}
			if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders,
				network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + token}}); err != nil {
				t.Fatal(err)
			}
			if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?group="+group)); err != nil {
				t.Fatal(err)
			}
			row := func(key string) string { return `document.querySelector('#jobTable tr[data-key="` + key + `"]')` }
			button := func(key, action string) string {
				return row(key) + `.querySelector('button[data-action="` + action + `"]')`
			}
			click := func(sel string) { eval[bool](t, ctx, `(() => { `+sel+`.click(); return true; })()`) }
			waitPage(t, ctx, "both keys owned, with their buttons", `(() => { const r = `+row("h1")+`, s = `+row("h2")+`;
				return r && s && r.cells[1].textContent !== "-" && s.cells[1].textContent !== "-" && `+button("h1", "run")+` !== null &&
				  getComputedStyle(document.querySelector("#jobTable th.act")).display !== "none"; })()`, 15*time.Second)
			if got := eval[string](t, ctx, row("h1")+`.querySelector("td.runs").textContent`); got != "0" {
				t.Fatalf("h1, due every hour on the hour, shows %s runs before any action; want 0", got)
			}

			click(button("h1", "run"))
			began := time.Now()
			waitPage(t, ctx, "h1's run on the blackboard", row("h1")+`.querySelector("td.runs").textContent === "1"`, 10*time.Second)
			t.Logf("%s: the run asked for showed on the blackboard %v after the click", b.name, time.Since(began).Round(time.Millisecond))
			waitPage(t, ctx, "the request in the history", `[...document.querySelectorAll("#histTable tbody tr")].some((r) => r.dataset.kind === "request" && r.cells[3].textContent === "run key h1")`, 5*time.Second)
			// The answer to the post may come after the run showed.
			waitPage(t, ctx, "the note that the request was logged", `document.getElementById("actionNote").textContent.includes("run key h1")`, 5*time.Second)

			click(button("h2", "pause"))
			waitPage(t, ctx, "h2 paused", row("h2")+`.dataset.state === "paused" && `+button("h2", "resume")+` !== null`, 10*time.Second)
			click(button("h2", "resume"))
			waitPage(t, ctx, "h2 resumed", row("h2")+`.dataset.state !== "paused" && `+button("h2", "pause")+` !== null`, 10*time.Second)

			click(`document.querySelector('#members tr[data-member="j1"] button[data-action="leave"]')`)
			select {
			case <-j1.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("j1 did not leave within 10 s of the click on leave")
			}
			if err := j1.Err(); !errors.Is(err, herd.ErrLeaveRequested) {
				t.Errorf("j1 stopped with %v; want ErrLeaveRequested", err)
			}
			waitPage(t, ctx, "j2 alone, owning both keys", `[...document.querySelectorAll("#members tbody tr")].map((r) => r.dataset.member).join() === "j2" &&
				[...document.querySelectorAll("#jobTable tbody tr")].every((r) => r.cells[1].textContent === "j2")`, 10*time.Second)
			screenshot(t, ctx, b.name, "actions")
		})
	}
}
