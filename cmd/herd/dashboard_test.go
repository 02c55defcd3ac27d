package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
)

func TestDashboardAddr(t *testing.T) {
	for in, want := range map[string]string{
		"8080": "127.0.0.1:8080", ":8080": "127.0.0.1:8080", "0.0.0.0:9000": "0.0.0.0:9000",
		"localhost:0": "localhost:0", "[::1]:80": "[::1]:80",
	} {
		if got, err := dashboardAddr(in); err != nil || got != want {
			t.Errorf("dashboardAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "host", "h:port", ":70000", "a/b:80"} {
		if _, err := dashboardAddr(in); err == nil || !strings.Contains(err.Error(), "--addr") {
			t.Errorf("dashboardAddr(%q): %v; want an error naming --addr", in, err)
		}
	}
}

// herd dashboard serves the page and the API of a store's groups on
// loopback, reading the token from HERD_DASHBOARD_TOKEN, and returns nil
// when its context ends.
func TestDashboardServes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "herd.db")
	st, err := sqlitestore.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := herd.Join(ctx, st, herd.Config{Group: "orders", Member: "a", Partitions: herd.Numbered(3),
		Logger: slog.New(slog.DiscardHandler), Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Leave(ctx)

	const token = "tok-81c2"
	runCtx, stop := context.WithCancel(ctx)
	urls := make(chan string, 1)
	done := make(chan error, 1)
	o := dashboardOpts{log: func() *slog.Logger { return slog.New(slog.DiscardHandler) }, storeURL: "sqlite://" + path, addr: ":0", timeout: 10 * time.Second,
		ready: func(u string) { urls <- u },
		env: func(k string) string {
			if k == dashboardTokenEnv {
				return token
			}
			return ""
		}}
	go func() { done <- runDashboard(runCtx, io.Discard, o) }()
	var base string
	select {
	case base = <-urls:
	case err := <-done:
		t.Fatalf("herd dashboard: %v", err)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("a port alone listens on %s, want loopback", base)
	}
	fetch := func(path, auth string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(base, "/")+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := fetch("/", ""); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", code)
	}
	code, body := fetch("/api/groups", "Bearer "+token)
	if code != http.StatusOK || !strings.Contains(body, `"orders"`) {
		t.Errorf("/api/groups: %d %s", code, body)
	}
	for _, p := range []string{"/", "/app.js", "/api/groups", "/api/group?group=orders"} {
		if _, body := fetch(p, "Bearer "+token); strings.Contains(body, path) || strings.Contains(body, "sqlite:") {
			t.Errorf("%s shows the store's URL", p)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("herd dashboard after its context ended: %v", err)
	}
}

// herd dashboard refuses actions by default (the store opened read-only);
// with --allow-actions it opens the store for writing and logs an action's
// request in the group, where a member reads it.
func TestDashboardActions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "herd.db")
	st, err := sqlitestore.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.SetPartitions(ctx, "nightly", store.PartitionSet{Partitions: []store.Partition{{ID: "report"}}}); err != nil {
		t.Fatal(err)
	}
	snap, err := st.Snapshot(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	for _, allow := range []bool{false, true} {
		runCtx, stop := context.WithCancel(ctx)
		urls := make(chan string, 1)
		done := make(chan error, 1)
		o := dashboardOpts{log: func() *slog.Logger { return slog.New(slog.DiscardHandler) }, storeURL: "sqlite://" + path, addr: ":0",
			timeout: 10 * time.Second, actions: allow, ready: func(u string) { urls <- u }, env: func(string) string { return "" }}
		go func() { done <- runDashboard(runCtx, io.Discard, o) }()
		var base string
		select {
		case base = <-urls:
		case err := <-done:
			t.Fatalf("herd dashboard: %v", err)
		}
		resp, err := http.Post(base+"api/action", "application/json", strings.NewReader(`{"group":"nightly","action":"run","key":"report"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusForbidden
		if allow {
			want = http.StatusAccepted
		}
		if resp.StatusCode != want {
			t.Errorf("--allow-actions=%v: an action answered %d, want %d", allow, resp.StatusCode, want)
		}
		stop()
		if err := <-done; err != nil {
			t.Errorf("herd dashboard after its context ended: %v", err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cs, _, err := st.Changes(cctx, "nightly", snap.Version, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Kind != store.Requested || cs[0].Request() != (store.Request{Action: store.RequestRun, Partition: "report"}) {
		t.Fatalf("the group's log after the two dashboards: %+v; want the one request of the dashboard with --allow-actions", cs)
	}
}
