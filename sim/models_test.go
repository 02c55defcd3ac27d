package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func scenario(t *testing.T, name string) Scenario {
	t.Helper()
	for _, sc := range Scenarios() {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %q", name)
	return Scenario{}
}

func run(t *testing.T, p Policy, name string) *Result {
	t.Helper()
	res, err := Run(context.Background(), p, scenario(t, name), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Metrics
	t.Logf("%s %s: balance %s owned %s moves %d/%d double %.1fs reads %.2f/s writes %.2f/s violations %v",
		name, p.Name(), fmtDur(m.TimeToBalance), fmtDur(m.TimeToOwned), m.Moves, m.MinMoves, m.DoubleSeconds,
		m.Rates.Reads, m.Rates.Writes, res.Violations)
	return res
}

func between(t *testing.T, what string, d, lo, hi time.Duration) {
	t.Helper()
	if d < lo || d > hi {
		t.Errorf("%s = %s, want between %s and %s", what, fmtDur(d), fmtDur(lo), fmtDur(hi))
	}
}

// The public reports on the Event Hubs processor: a new instance takes one
// partition per cycle, so 1 -> 4 instances over 32 partitions settles in
// about a minute (8 partitions each, ~10 s a cycle), with the stolen
// partitions processed twice until their old owner's next cycle.
func TestEventHubsScaleOut(t *testing.T) {
	bal := run(t, EventHubs{}, "scale-out-1-4")
	between(t, "eh-balanced time to balance", bal.Metrics.TimeToBalance, 50*time.Second, 150*time.Second)
	if bal.Metrics.Moves != 24 || bal.Metrics.MinMoves != 24 {
		t.Errorf("eh-balanced moves %d (min %d), want 24 (24)", bal.Metrics.Moves, bal.Metrics.MinMoves)
	}
	if bal.Metrics.DoubleSeconds == 0 || bal.Violations[Exclusive] == 0 {
		t.Error("eh-balanced: stealing must show double ownership until the old owner's next cycle")
	}
	greedy := run(t, EventHubs{Greedy: true}, "scale-out-1-4")
	if greedy.Metrics.TimeToBalance >= bal.Metrics.TimeToBalance {
		t.Errorf("greedy (%s) not faster than balanced (%s)", fmtDur(greedy.Metrics.TimeToBalance), fmtDur(bal.Metrics.TimeToBalance))
	}
}

// A graceful leave relinquishes; a crash waits for the 60 s expiry.
func TestEventHubsLeaveVersusCrash(t *testing.T) {
	leave := run(t, EventHubs{}, "graceful-leave")
	crash := run(t, EventHubs{}, "crash-1-of-4")
	between(t, "eh leave: time to owned", leave.Metrics.TimeToOwned, 5*time.Second, 45*time.Second)
	between(t, "eh crash: time to owned", crash.Metrics.TimeToOwned, 60*time.Second, 100*time.Second)
}

// KCL: a dead worker's leases are seen expired by a taker 20-40 s after its
// last renewal (failover 10 s, taker every 20 s) and taken at that scan;
// takers that scan at the same moment collide on some leases, which wait
// for the next scan.
func TestKCLCrash(t *testing.T) {
	res := run(t, KCL{}, "crash-1-of-4")
	between(t, "kcl crash: time to owned", res.Metrics.TimeToOwned, 20*time.Second, 65*time.Second)
	if res.Metrics.DoubleSeconds != 0 || res.Violations[Fenced] != 0 {
		t.Errorf("kcl crash: double %.1f s, fenced %d; want none", res.Metrics.DoubleSeconds, res.Violations[Fenced])
	}
	// Steady state: one renewal per lease per 3.3 s: 32/3.3 ≈ 9.7 writes/s.
	if w := res.Metrics.Steady.PerMember * 4; w < 9 || w > 11 {
		t.Errorf("kcl steady ops %.1f/s for 32 leases, want about 9.7", w)
	}
}

// KCL steals one lease per taker cycle: 1 -> 4 workers over 32 leases takes
// eight 20 s cycles.
func TestKCLScaleOut(t *testing.T) {
	res := run(t, KCL{}, "scale-out-1-4")
	between(t, "kcl scale-out: time to balance", res.Metrics.TimeToBalance, 120*time.Second, 200*time.Second)
}

// Wall-clock jumps: Event Hubs compares the store's last-modified time with
// the local clock, KCL uses its monotonic clock.
func TestClockJump(t *testing.T) {
	eh := run(t, EventHubs{}, "clock-jump")
	if eh.Metrics.Moves == 0 {
		t.Error("eh: a clock 2 minutes ahead must see every ownership as expired and take partitions")
	}
	kcl := run(t, KCL{}, "clock-jump")
	if kcl.Metrics.Moves != 0 {
		t.Errorf("kcl: a wall-clock jump moved %d partitions", kcl.Metrics.Moves)
	}
}

// Seed 001's author: "nodes under heavy load tend to be too slow to answer
// to hold on to their leases causing partitions to jump between hosts".
func TestSeed001SlowMemberLosesPartitions(t *testing.T) {
	res := run(t, Seed001{}, "slow-member-10min")
	if res.Metrics.Moves == 0 {
		t.Error("seed001: a starved node kept its partitions; the race should take them")
	}
	eh := run(t, EventHubs{}, "slow-member-10min")
	if eh.Metrics.Moves != 0 {
		t.Errorf("eh: a starved processor lost %d partitions (its 60 s expiry should cover the lag)", eh.Metrics.Moves)
	}
}

// A paused owner resumes still processing: unfenced checkpoints are
// accepted from it, KCL's conditional checkpoints are not.
func TestPauseFencing(t *testing.T) {
	eh := run(t, EventHubs{}, "pause-90s")
	if eh.Violations[Fenced]+eh.Violations[Monotonic] == 0 {
		t.Error("eh: the resumed processor's checkpoints should be accepted although stale")
	}
	kcl := run(t, KCL{}, "pause-90s")
	if kcl.Violations[Fenced] != 0 || kcl.Violations[Monotonic] != 0 {
		t.Errorf("kcl: fenced checkpoints let stale writes through: %v", kcl.Violations)
	}
}

func TestRunIsDeterministic(t *testing.T) {
	for _, p := range Models() {
		a := run(t, p, "crash-1-of-4")
		b := run(t, p, "crash-1-of-4")
		if a.Metrics != b.Metrics || a.Cost.Events != b.Cost.Events {
			t.Errorf("%s: two runs with the same seed differ:\n%+v\n%+v", p.Name(), a.Metrics, b.Metrics)
		}
	}
}

func TestMinMoves(t *testing.T) {
	for _, tc := range []struct {
		have  []int
		total int
		want  int64
	}{
		{[]int{32, 0, 0, 0}, 32, 24},
		{[]int{8, 8, 8}, 32, 8},          // a member with 8 crashed: its 8 move
		{[]int{11, 11, 10, 0}, 32, 8},    // a 4th joins 3 balanced members
		{[]int{10, 10, 10, 2}, 32, 6},    // 10,10,10,2 -> 8,8,8,8
		{[]int{5, 5, 5, 5, 5, 5}, 30, 0}, // balanced
		{[]int{0}, 48, 48},               // new partitions
	} {
		got, after := minMoves(tc.have, tc.total)
		sum := 0
		for _, a := range after {
			sum += a
		}
		if got != tc.want || sum != tc.total {
			t.Errorf("minMoves(%v, %d) = %d, %v; want %d", tc.have, tc.total, got, after, tc.want)
		}
	}
}

// RunAll end to end on the small scenarios, and the outputs.
func TestRunAllOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every small scenario")
	}
	rep, err := RunAll(context.Background(), Options{Match: regexp.MustCompile(`^(scale-out-1-4|crash-1-of-4|pause-90s)$`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 3*len(Models()) {
		t.Fatalf("%d results, want %d", len(rep.Results), 3*len(Models()))
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteSummary(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"== crash-1-of-4", "eh-balanced", "kcl-2.x", "seed001-redis", "double-s", "== summary", "-- partitions moved / the minimum"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Results []struct {
			Policy  string  `json:"policy"`
			Metrics Metrics `json:"metrics"`
			Series  *Series `json:"series"`
		} `json:"results"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != len(rep.Results) || back.Results[0].Series == nil || len(back.Results[0].Series.Held) == 0 {
		t.Fatal("JSON lacks results or series")
	}
	dir := t.TempDir()
	paths, err := rep.WriteCharts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 {
		t.Fatalf("%d charts, want 3", len(paths))
	}
	b, err := os.ReadFile(filepath.Join(dir, "crash-1-of-4.png"))
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("chart is not a PNG: %v", err)
	}
}
