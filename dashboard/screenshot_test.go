package dashboard_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// updateScreenshots: the browser tests write the docs' screenshots of the
// main views (docs/img/dashboard-*.png) when run with
//
//	go test ./dashboard -run 'TestBrowser(Views|Jobs)' -update-screenshots
//
// A normal run writes nothing.
var updateScreenshots = flag.Bool("update-screenshots", false, "write the docs' screenshots of the dashboard (docs/img/dashboard-*.png)")

// screenshot writes the page as docs/img/dashboard-NAME.png under
// -update-screenshots (from the SQLite run only, so one run writes each
// image once).
func screenshot(t *testing.T, ctx context.Context, backend, name string) {
	t.Helper()
	if !*updateScreenshots || backend != "sqlite" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join("..", "docs", "img", "dashboard-"+name+".png")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}
