package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store/memstore"
)

// get fetches url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// waitFor fetches url until its body matches re, for up to 10 s.
func waitFor(t *testing.T, url string, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := get(t, url)
		if re.MatchString(body) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s never matched %s; last:\n%s", url, re, body)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
	}
}

// --metrics ADDR: a port alone means the loopback interface; a host is
// taken as given; anything else is refused with what to write.
func TestMetricsAddr(t *testing.T) {
	for in, want := range map[string]string{
		":9090": "127.0.0.1:9090", ":0": "127.0.0.1:0", "localhost:9090": "localhost:9090",
		"0.0.0.0:9090": "0.0.0.0:9090", "[::1]:9090": "[::1]:9090", "10.0.0.7:80": "10.0.0.7:80",
	} {
		if got, err := metricsAddr(in); err != nil || got != want {
			t.Errorf("metricsAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"9090": "want host:port", "": "want host:port", ":http": "the port must be a number",
		":70000": "the port must be a number", "a/b:1": "is not a host",
	} {
		if _, err := metricsAddr(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("metricsAddr(%q): %v; want an error containing %q", in, err, want)
		}
	}
	_, _, msg := executeC(t, "demo", "--metrics", "9090")
	if !strings.Contains(msg, `--metrics "9090": want host:port`) {
		t.Errorf("demo --metrics 9090: %q", msg)
	}
}

// The server answers /metrics with the members' metrics and /healthz with
// 200 while the member's session is live, 503 once it has left; stop
// closes the listener. ":0" listens on the loopback interface.
func TestServeMetricsAndHealth(t *testing.T) {
	reg := newMetricsRegistry()
	st := memstore.New()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	m, err := herd.Join(ctx, st, herd.Config{
		Group: "g", Member: "a", Partitions: herd.Numbered(4), Metrics: reg, Logger: slog.New(slog.DiscardHandler),
		Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	addr, stop, err := serveMetrics(ctx, ":0", reg, func() error { return membersHealth(m) }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Errorf("--metrics :0 listens on %s; want 127.0.0.1", addr)
	}
	base := "http://" + addr
	body := waitFor(t, base+"/metrics", regexp.MustCompile(`herd_claims_total\{group="g",member="a"\} 4`))
	for _, want := range []string{
		`herd_partitions_owned{group="g",member="a"} 4`,
		`herd_session_live{group="g",member="a"} 1`,
		`herd_handoffs_total{group="g",member="a"} 0`,
		`herd_losses_total{group="g",member="a"} 0`,
		`herd_fencing_rejections_total{group="g",member="a",reason="not_owner"} 0`,
		`herd_session_renewals_total{group="g",member="a",result="ok"}`,
		`herd_session_renewal_duration_seconds_bucket{group="g",member="a",le="0.001"}`,
		`herd_store_errors_total{group="g",member="a",op="claim_batch"} 0`,
		`herd_rebalance_duration_seconds_count{group="g",member="a"} 1`,
		"go_goroutines", "process_cpu_seconds_total",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz with a live session: %d %q; want 200 ok", code, body)
	}
	if err := m.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, base+"/healthz"); code != 503 || !strings.Contains(body, "no live session") || !strings.Contains(body, "member a") {
		t.Errorf("/healthz after the member left: %d %q; want 503 naming member a", code, body)
	}
	if _, body := get(t, base+"/metrics"); strings.Contains(strings.ReplaceAll(body, "herd_build_info", ""), "herd_") {
		t.Errorf("/metrics still shows the member's metrics after it left:\n%s", body)
	}
	stop()
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the server still answers after stop")
	}
	_, stop2, err := serveMetrics(ctx, addr, reg, func() error { return nil }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("listening again on %s after stop: %v", addr, err)
	}
	stop2()
}

// The server stops when its context ends; stop then returns at once.
func TestServeMetricsStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	addr, stop, err := serveMetrics(ctx, "127.0.0.1:0", newMetricsRegistry(), func() error { return fmt.Errorf("starting") }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, "http://"+addr+"/healthz"); code != 503 || body != "unhealthy: starting\n" {
		t.Errorf("/healthz: %d %q; want 503 with the reason", code, body)
	}
	cancel()
	stop()
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("the server still answers after its context ended")
	}
}

// metricsWriter scrapes /metrics and /healthz once the demo's output shows
// step 2 (four members), from the address the demo printed.
type metricsWriter struct {
	t       *testing.T
	mu      sync.Mutex
	buf     strings.Builder
	metrics string
	health  int
}

func (w *metricsWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.metrics == "" && strings.Contains(w.buf.String(), "step 2:") {
		m := regexp.MustCompile(`metrics on (http://\S+)/metrics`).FindStringSubmatch(w.buf.String())
		if m == nil {
			w.t.Errorf("the demo did not print where its metrics are:\n%s", w.buf.String())
			w.metrics = "none"
			return len(p), nil
		}
		w.health, _ = get(w.t, m[1]+"/healthz")
		_, w.metrics = get(w.t, m[1]+"/metrics")
	}
	return len(p), nil
}

// herd demo --metrics: during the demo /metrics shows the members'
// metrics and /healthz is 200.
func TestDemoServesMetrics(t *testing.T) {
	conn, err := newConnector("mem://")
	if err != nil {
		t.Fatal(err)
	}
	w := &metricsWriter{t: t}
	if err := runDemo(t.Context(), w, demoOpts{partitions: 32, ttl: 200 * time.Millisecond, conn: conn, metrics: "127.0.0.1:0"}); err != nil {
		t.Fatalf("demo: %v\n%s", err, w.buf.String())
	}
	if w.health != 200 {
		t.Errorf("/healthz during the demo: %d; want 200", w.health)
	}
	owned := regexp.MustCompile(`(?m)^herd_partitions_owned\{group="demo-\d+",member="m\d"\} (\d+)$`).FindAllStringSubmatch(w.metrics, -1)
	total := 0
	for _, o := range owned {
		var n int
		fmt.Sscan(o[1], &n)
		total += n
	}
	if len(owned) != 4 || total != 32 {
		t.Errorf("/metrics after step 2: %d members owning %d partitions; want 4 owning 32:\n%s", len(owned), total, w.metrics)
	}
	for _, want := range []string{"herd_claims_total{", "herd_handoffs_total{", "herd_session_renewals_total{", "herd_rebalance_duration_seconds_bucket{"} {
		if !strings.Contains(w.metrics, want) {
			t.Errorf("/metrics during the demo lacks %s", want)
		}
	}
	memEmpty(t, conn, groupOf(t, w.buf.String()))
}
