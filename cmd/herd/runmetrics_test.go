package main

import (
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricValue is the value of the series line of body that starts with
// series (name and labels as exposed), and whether there is one.
func metricValue(body, series string) (float64, bool) {
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// herd run --metrics exports its children: those running, their exits by
// status, restarts and give-backs, and herd_build_info.
func TestRunMetricsChildren(t *testing.T) {
	addr := freeLoopbackAddr(t)
	dir := t.TempDir()
	startRunIn(t, "m", dir, nil, "--group", "g", "--member", "m1", "--partitions", "a,b", "--metrics", addr,
		"--restart-delay", "10ms", "--restart-max", "40ms", "--max-failures", "2",
		"--", "sh", "-c", `if [ "$HERD_PARTITION" = a ]; then exec sleep 600; fi; exit 7`)
	eventually(t, 30*time.Second, "the metrics server listening", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	body := waitFor(t, "http://"+addr+"/metrics", regexp.MustCompile(`herd_run_givebacks_total\{group="g",member="m1"\} [1-9]`))
	const l = `{group="g",member="m1"}`
	for _, c := range []struct {
		series string
		least  float64
	}{
		{"herd_run_children_running" + l, 1},
		{`herd_run_child_exits_total{group="g",member="m1",status="7"}`, 2},
		{"herd_run_child_restarts_total" + l, 1},
		{"herd_run_givebacks_total" + l, 1},
	} {
		if v, ok := metricValue(body, c.series); !ok || v < c.least {
			t.Errorf("%s = %v (found %v); want at least %v", c.series, v, ok, c.least)
		}
	}
	if v, _ := metricValue(body, `herd_run_child_exits_total{group="g",member="m1",status="0"}`); v != 0 {
		t.Errorf("exits with status 0: %v; want 0", v)
	}
	info := regexp.MustCompile(`(?m)^herd_build_info\{goversion="([^"]+)",version="([^"]+)"\} 1$`).FindStringSubmatch(body)
	if info == nil || info[1] != runtime.Version() || strings.Contains(info[2], "(") {
		t.Errorf("herd_build_info: %q; want goversion %s and the version alone", info, runtime.Version())
	}
}

// A child that exits 0 did its work: its exit is logged at INFO, not WARN.
func TestRunChildExitZeroLoggedAtInfo(t *testing.T) {
	m := startRunIn(t, "m", t.TempDir(), nil, "--group", "g", "--partitions", "p",
		"--restart-delay", "10ms", "--restart-max", "20ms", "--", "true")
	eventually(t, 30*time.Second, "two exits", func() bool { return strings.Contains(m.out.String(), "exits_in_a_row=2") })
	for line := range strings.Lines(m.out.String()) {
		if strings.Contains(line, "child exited") && !strings.Contains(line, "level=INFO") {
			t.Errorf("an exit with status 0 logged as %q; want level=INFO", strings.TrimSpace(line))
		}
	}
}
