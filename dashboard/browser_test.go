package dashboard_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/dashboard"
	"github.com/herdhq/herd/internal/redistest"
)

// browser starts a headless Chromium (Debian's chromium, or
// HERD_CHROMIUM) for t and returns a tab's context. Without one the test
// is skipped, or fails under HERD_REQUIRE_SERVERS=1 (.ci/run installs
// chromium).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("HERD_CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		redistest.SkipOrFail(t, "no chromium on PATH (apt-get install chromium, or set HERD_CHROMIUM)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`1`)); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitPage polls a JavaScript predicate until it is true, failing after d.
func waitPage(t *testing.T, ctx context.Context, what, expr string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		// A poll begun while the page was still loading loses its
		// context: begin again.
		if !strings.Contains(err.Error(), "Cannot find context") || time.Now().After(deadline) {
			t.Fatalf("the page did not show %s within %v: %v; the page: %s", what, d, err, pageState(ctx))
		}
	}
}

// pageState describes the page, for a test that failed waiting on it.
func pageState(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({
		address: location.href, status: document.getElementById("status").textContent,
		summary: document.getElementById("summary").textContent,
		unowned: document.getElementById("unownedCount").textContent,
		members: document.querySelectorAll("#members tbody tr").length,
		dash: window.herdDash && { version: herdDash.version, stateAt: herdDash.stateAt, mapDrawnAt: herdDash.mapDrawnAt, events: herdDash.events } })`))
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return s
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// ownersExpr is a predicate true when the page shows each of ids run by
// one of members.
func ownersExpr(ids []string, members ...string) string {
	a, _ := json.Marshal(ids)
	m, _ := json.Marshal(members)
	return `window.herdDash && (() => { const ms = ` + string(m) + `; return ` + string(a) +
		`.every((id) => ms.includes(herdDash.ownerOf(id))); })()`
}

// checkCells fails t unless every cell of the map is drawn in its owner's
// colour (grey for nobody), once the page has drawn what it holds.
func checkCells(t *testing.T, ctx context.Context) {
	t.Helper()
	waitPage(t, ctx, "a drawn map", `herdDash.mismatches() !== null`, 5*time.Second)
	if bad := eval[[]string](t, ctx, `herdDash.mismatches()`); len(bad) > 0 {
		t.Errorf("cells not drawn in their owner's colour: %q", bad)
	}
}

// In a real browser, on every backend: the page shows every member and
// every partition with its owner, and after a member stops renewing (as
// if killed) the map shows its partitions on the others within TTL + 1 s.
func TestBrowserTakeover(t *testing.T) {
	ctx := browser(t)
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			group, ttl := uniqueGroup(t), time.Second
			ps := herd.Numbered(24)
			ids := make([]string, len(ps))
			for i, p := range ps {
				ids[i] = p.ID
			}
			a := join(t, b.rw, group, "a", ps, ttl)
			join(t, b.rw, group, "b", nil, ttl)
			join(t, b.rw, group, "c", nil, ttl)
			base := serve(t, dashboard.New(b.ro, dashboard.WithLogger(quiet)))
			waitGroup(t, base, group, 10*time.Second, func(g groupJSON) bool {
				return len(g.Members) == 3 && g.Unowned == 0 &&
					g.Members[0].Owned > 0 && g.Members[1].Owned > 0 && g.Members[2].Owned > 0
			})

			if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#group="+group)); err != nil {
				t.Fatal(err)
			}
			waitPage(t, ctx, "every partition run by a, b or c", ownersExpr(ids, "a", "b", "c"), 10*time.Second)
			checkCells(t, ctx)
			if got := eval[string](t, ctx, `location.search + location.hash`); got != "?group="+group {
				t.Errorf("the address #group=%s reads %q, want ?group=%[1]s", group, got)
			}
			rows := eval[[]string](t, ctx, `[...document.querySelectorAll("#members tbody tr")].map((r) => r.dataset.member)`)
			if strings.Join(rows, ",") != "a,b,c" {
				t.Errorf("members table: %q, want a, b, c", rows)
			}
			owned := eval[[]string](t, ctx, `[...document.querySelectorAll("#members td.owned")].map((td) => td.textContent)`)
			if len(owned) != 3 || owned[0] == "0" || owned[1] == "0" || owned[2] == "0" {
				t.Errorf("owned column: %q", owned)
			}
			if got := eval[string](t, ctx, `document.getElementById("unownedCount").textContent`); got != "(0)" {
				t.Errorf("partitions nobody runs: %q, want (0)", got)
			}
			if got := eval[string](t, ctx, `(() => { const s = document.getElementById("search"); s.value = "7"; s.dispatchEvent(new Event("input")); return document.getElementById("found").textContent; })()`); !strings.HasPrefix(got, "7 · owner ") {
				t.Errorf("searching partition 7 shows %q", got)
			}

			// A member joining takes partitions from the others: deltas
			// of claims and releases alone, whose cells only are redrawn.
			join(t, b.rw, group, "d", nil, ttl)
			waitPage(t, ctx, "d running partitions", ownersExpr(ids, "a", "b", "c", "d")+
				` && `+string(mustMarshal(ids))+`.some((id) => herdDash.ownerOf(id) === "d")`, 10*time.Second)
			checkCells(t, ctx)

			a.gate.Pause() // a stops renewing: its session expires after ttl, as if killed
			paused := time.Now()
			waitPage(t, ctx, "a's partitions on b, c and d", ownersExpr(ids, "b", "c", "d"), ttl+time.Second)
			t.Logf("%s: the map showed the takeover %v after a stopped (TTL %v)", b.name, time.Since(paused).Round(time.Millisecond), ttl)
			checkCells(t, ctx)
			rows = eval[[]string](t, ctx, `[...document.querySelectorAll("#members tbody tr")].map((r) => r.dataset.member)`)
			if strings.Join(rows, ",") != "b,c,d" {
				t.Errorf("members table after the takeover: %q, want b, c, d", rows)
			}
		})
	}
}
