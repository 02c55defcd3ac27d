package sim

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// TestHerdScenarios runs herd's real member code through the harness under
// virtual time and requires the invariants: never two live handlers for a
// partition, no accepted stale-epoch write, checkpoints never backwards,
// every partition owned again within the failover bound, a fair spread at
// the end.
func TestHerdScenarios(t *testing.T) {
	names := []string{"scale-out-1-4", "graceful-leave", "crash-1-of-4", "pause-90s", "store-outage-30s", "partitions-change", "clock-jump", "slow-member-10min"}
	if !testing.Short() {
		names = append(names, "flaky-store-crash", "rolling-restart-20", "scale-out-10-20")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				res := run(t, Herd{Idle: synctest.Wait}, name)
				for _, inv := range Invariants {
					if n := res.Violations[inv]; n > 0 {
						t.Errorf("%s: %d %s violations", name, n, inv)
					}
				}
				for _, v := range res.Details {
					t.Log(v)
				}
				if n := sumViolations(res.WarmupViolations); n > 0 {
					t.Errorf("%s: %d violations during the warm-up: %v", name, n, res.WarmupViolations)
				}
				if m := res.Metrics; m.TimeToBalance < 0 || m.TimeToBalance > 2*time.Minute {
					t.Errorf("%s: time to balance %s", name, fmtDur(m.TimeToBalance))
				}
			})
		})
	}
}

// TestReport runs every scenario with herd and the models and writes the
// table, report.json and the charts into $HERDSIM_OUT: the report of
// cmd/herdsim, from go test. HERDSIM_LARGE=1 adds the large scenario,
// HERDSIM_RUN selects scenarios by name.
//
//	HERDSIM_OUT=simout go -C sim test . -run TestReport -timeout 60m -v
func TestReport(t *testing.T) {
	out := os.Getenv("HERDSIM_OUT")
	if out == "" {
		t.Skip("set HERDSIM_OUT to a directory to write the full report")
	}
	h := Herd{Idle: synctest.Wait, Bubble: func(run func()) {
		synctest.Test(t, func(*testing.T) { run() })
	}}
	o := Options{Policies: append([]Policy{h}, Models()...), Large: os.Getenv("HERDSIM_LARGE") != "", Progress: os.Stderr}
	if re := os.Getenv("HERDSIM_RUN"); re != "" {
		o.Match = regexp.MustCompile(re)
	}
	rep, err := RunAll(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := rep.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	if _, err := rep.WriteCharts(out); err != nil {
		t.Fatal(err)
	}
}

// TestHerdScaleProbe measures herd's cost as the fleet grows: n members,
// 100 partitions each, 1% crash. HERDSIM_PROBE=n.
//
//	HERDSIM_PROBE=200 go -C sim test . -run TestHerdScaleProbe -v
func TestHerdScaleProbe(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HERDSIM_PROBE"))
	if n < 2 {
		t.Skip("set HERDSIM_PROBE to the number of members")
	}
	sc := Scenario{Name: "probe", Partitions: n * 100, Members: n, MeasureFrom: -1, Duration: time.Minute,
		Steps: []Step{{At: 0, Do: Crash, Members: memberRange(n-max(1, n/100), n)}}}
	synctest.Test(t, func(t *testing.T) {
		res, err := Run(t.Context(), Herd{Idle: synctest.Wait}, sc, RunOptions{MeasureCost: true})
		if err != nil {
			t.Fatal(err)
		}
		c := res.Cost
		t.Logf("%d members x %d partitions: warm-up %s, balance %s, owned %s; wall %s, cpu %s, cpu/member/min %s, cpu/rebalance %s, heap/member %s; violations %v",
			n, sc.Partitions, fmtDur(res.WarmupEnd), fmtDur(res.Metrics.TimeToBalance), fmtDur(res.Metrics.TimeToOwned),
			c.Wall.Round(time.Millisecond), c.CPU.Round(time.Millisecond), c.CPUPerMemberMinute.Round(time.Microsecond),
			c.CPURebalance.Round(time.Millisecond), fmtBytes(c.HeapPerMember), res.Violations)
	})
}
