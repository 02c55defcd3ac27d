package dashboard_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/dashboard"
)

// In a real browser, on every backend, the views the log does not feed:
// TTLs left and checkpoint ages from the shared refresher (the map
// coloured by age), the ownership history of a takeover with its
// duration, and why nobody runs partitions once every member has stopped.
func TestBrowserViews(t *testing.T) {
	ctx := browser(t)
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			group, ttl := uniqueGroup(t), 2*time.Second
			ps := herd.Numbered(12)
			ids := make([]string, len(ps))
			for i, p := range ps {
				ids[i] = p.ID
			}
			a := joinCheckpointing(t, b.rw, group, "a", ps, ttl, "")
			bm := joinCheckpointing(t, b.rw, group, "b", nil, ttl, "")
			base := serve(t, dashboard.New(b.ro, dashboard.WithLogger(quiet), dashboard.WithRefresh(250*time.Millisecond)))
			waitGroup(t, base, group, 10*time.Second, func(g groupJSON) bool {
				return len(g.Members) == 2 && g.Unowned == 0 && g.Members[0].Owned > 0 && g.Members[1].Owned > 0
			})
			if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?group="+group)); err != nil {
				t.Fatal(err)
			}
			waitPage(t, ctx, "every partition run by a or b", ownersExpr(ids, "a", "b"), 10*time.Second)

			// TTLs left, counting down from the last read.
			// Read in the same evaluation that finds them shown: the page
			// redraws the table (with "…" until the next read) meanwhile.
			waitPage(t, ctx, "TTLs left", `(() => { const v = [...document.querySelectorAll("#members td.ttl")].map((td) => td.textContent); window.herdTestTTLs = v; return v.length > 0 && v.every((s) => / s$/.test(s)); })()`, 5*time.Second)
			ttls := eval[[]string](t, ctx, `window.herdTestTTLs`)
			for _, s := range ttls {
				if v, err := strconv.ParseFloat(strings.TrimSuffix(s, " s"), 64); err != nil || v <= 0 || v > ttl.Seconds() {
					t.Errorf("TTL left %q, want within (0, %v]", s, ttl)
				}
			}
			// Checkpoint ages: the oldest listed, and the map coloured
			// by age cell by cell.
			waitPage(t, ctx, "the oldest checkpoints", `document.querySelectorAll("#oldest tbody tr").length > 0`, 10*time.Second)
			eval[bool](t, ctx, `(() => { const s = document.getElementById("colour"); s.value = "age"; s.dispatchEvent(new Event("change")); return true; })()`)
			checkCells(t, ctx)
			eval[bool](t, ctx, `(() => { const s = document.getElementById("colour"); s.value = "owner"; s.dispatchEvent(new Event("change")); return true; })()`)

			// A takeover in the history: a's session expires, b claims
			// a's partitions, and the page says how long that took.
			a.gate.Pause()
			waitPage(t, ctx, "a's partitions on b", ownersExpr(ids, "b"), ttl+2*time.Second)
			waitPage(t, ctx, "a's expiry and b's claims in the history",
				`(() => { const rows = [...document.querySelectorAll("#histTable tbody tr")];
				  return rows.some((r) => r.dataset.kind === "expire" && r.dataset.member === "a") &&
				    rows.some((r) => r.dataset.kind === "claim" && r.dataset.member === "b" && r.cells[4].textContent.includes("a (expired)") && / (ms|s)\b/.test(r.cells[5].textContent)); })()`,
				5*time.Second)
			row := eval[[]string](t, ctx, `[...[...document.querySelectorAll("#histTable tbody tr")].find((r) => r.dataset.kind === "claim" && r.dataset.member === "b" && r.cells[4].textContent.includes("a (expired)")).cells].map((c) => c.textContent)`)
			t.Logf("%s: history row of the takeover: %q", b.name, row)
			if note := eval[string](t, ctx, `document.getElementById("histNote").textContent`); !strings.Contains(note, "on the store's clock") ||
				!strings.Contains(note, "reaches back to") || strings.Contains(note, "marked *") {
				t.Errorf("history note %q does not say whose times these are and how far back it reaches, or says some have none", note)
			}
			screenshot(t, ctx, b.name, "group")

			// b stops too: on SQLite, which the dashboard only reads,
			// b's session stays in the log and the page shows its TTL ran
			// out; on Redis the dashboard's own reads expire it (any
			// call may), and nobody runs the partitions: no member lives.
			bm.gate.Pause()
			if b.name == "sqlite" {
				waitPage(t, ctx, "b's TTL run out", `(() => { const li = document.querySelector("#stale li"); return li && li.dataset.member === "b" && li.dataset.count === "12"; })()`, ttl+2*time.Second)
				waitPage(t, ctx, "b's row marked", `document.querySelector("#members tr.overdue") !== null`, time.Second)
				return
			}
			waitPage(t, ctx, "12 partitions nobody runs, as no member lives", `document.getElementById("unownedCount").textContent === "(12)" &&
				[...document.querySelectorAll("#unowned li")].every((li) => li.textContent.includes("no member is alive (its owner b's session expired at"))`, ttl+3*time.Second)
		})
	}
}
