package netpart

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Seeds: HERD_NETPART_SEEDS lists them ("7", "1,5,9", "1-100"); without
// it HERD_NETPART_RUNS seeds are drawn from the clock. With neither set
// TestPartitions runs nothing: the runs are asked for (scripts/partitions),
// as their randomized faults still find violations (docs/partitions.md).
const (
	envSeeds   = "HERD_NETPART_SEEDS"
	envRuns    = "HERD_NETPART_RUNS"
	envRequire = "HERD_REQUIRE_NETNS" // "1": fail instead of skipping without root, ip, tc
	envHerd    = "HERD_NETPART_HERD"  // a herd binary already built (scripts/partitions)
	// envBackends lists the stores to run each seed on (default: redis,
	// and postgres where its server programs are installed).
	envBackends = "HERD_NETPART_BACKENDS"
	// envKinds lists the kinds of faults the schedules draw from
	// (default: all but long-cut; "long-cut": docs/takeover.md).
	envKinds = "HERD_NETPART_KINDS"
	envKeep  = "HERD_NETPART_KEEP" // "1": keep every run's logs, not only a failed one's
)

// TestPartitions runs herd run members in network namespaces of their own
// through each seed's faults and checks every history. A failure names
// the seed and the command that reruns it; the run's logs are kept.
func TestPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("network partitions take tens of seconds a seed; skipped with -short")
	}
	if os.Getenv(envSeeds) == "" && os.Getenv(envRuns) == "" {
		t.Skipf("network partitions run when asked for: %s=N, %s=LIST or scripts/partitions", envRuns, envSeeds)
	}
	if m := Missing(); len(m) > 0 {
		if os.Getenv(envRequire) == "1" {
			t.Fatalf("network partitions need %v (%s=1)", m, envRequire)
		}
		t.Skipf("network partitions need %v", m)
	}
	seeds, err := parseSeeds(os.Getenv(envSeeds), os.Getenv(envRuns))
	if err != nil {
		t.Fatal(err)
	}
	kinds, err := ParseKinds(os.Getenv(envKinds))
	if err != nil {
		t.Fatalf("%s: %v", envKinds, err)
	}
	ctx := context.Background()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv(envHerd)
	if bin == "" {
		if bin, err = BuildHerd(ctx, root, t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	for _, backend := range backends(t) {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", backend, seed), func(t *testing.T) { runSeed(t, ctx, bin, backend, kinds, seed) })
		}
	}
}

func backends(t *testing.T) []string {
	if b := os.Getenv(envBackends); b != "" {
		return strings.Split(b, ",")
	}
	if _, err := os.Stat(filepath.Join(pgBin, "initdb")); err != nil {
		t.Logf("PostgreSQL's server programs are not in %s: runs on redis only", pgBin)
		return []string{"redis"}
	}
	return Backends
}

func runSeed(t *testing.T, ctx context.Context, bin, backend string, kinds []Kind, seed int64) {
	dir, err := os.MkdirTemp("", fmt.Sprintf("herd-netpart-%d-", seed))
	if err != nil {
		t.Fatal(err)
	}
	rerun := fmt.Sprintf("%s=%s %s=%d go test ./internal/netpart -run TestPartitions -count=1 -v", envBackends, backend, envSeeds, seed)
	if k := os.Getenv(envKinds); k != "" {
		rerun = envKinds + "=" + k + " " + rerun
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d failed; logs kept in %s; rerun: %s", seed, dir, rerun)
			return
		}
		if os.Getenv(envKeep) == "1" {
			t.Logf("seed %d: logs kept in %s", seed, dir)
			return
		}
		os.RemoveAll(dir)
	})
	h, err := Run(ctx, Config{Seed: seed, Backend: backend, Kinds: kinds, HerdBin: bin, Dir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatalf("seed %d: the run failed: %v", seed, err)
	}
	v := Check(h)
	tv, tfigs := CheckTieEnds(h)
	v = append(v, tv...)
	for _, s := range tfigs {
		t.Logf("NETPART-LONGCUT seed=%d %s", seed, s)
	}
	for _, s := range v {
		t.Errorf("seed %d: %s", seed, s)
	}
	starts, saves := 0, 0
	for _, e := range h.Events {
		if e.Kind == "start" {
			starts++
		}
		if e.Saved() {
			saves++
		}
	}
	// One line per seed, which scripts/partitions sums up.
	fig := Measure(h)
	t.Logf("NETPART backend=%s seed=%d faults=%s starts=%d saves=%d violations=%d takeover_ms=%s settle_ms=%s",
		backend, seed, faultKinds(h.Faults), starts, saves, len(v), millis(fig.Takeovers), millis(fig.Settles))
}

// millis prints durations as a comma-separated list of milliseconds ("-":
// none).
func millis(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	var s []string
	for _, d := range ds {
		s = append(s, strconv.FormatInt(d.Milliseconds(), 10))
	}
	return strings.Join(s, ",")
}

func faultKinds(fs []Fault) string {
	var k []string
	for _, f := range fs {
		k = append(k, string(f.Kind))
	}
	return strings.Join(k, ",")
}

func parseSeeds(list, runs string) ([]int64, error) {
	if list == "" {
		n := 2
		if runs != "" {
			var err error
			if n, err = strconv.Atoi(runs); err != nil || n < 1 {
				return nil, fmt.Errorf("%s=%q: want a count of runs, 1 or more", envRuns, runs)
			}
		}
		rng := rand.New(rand.NewSource(time.Now().UnixNano()))
		var seeds []int64
		for i := 0; i < n; i++ {
			seeds = append(seeds, 1+rng.Int63n(1_000_000))
		}
		return seeds, nil
	}
	var seeds []int64
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		b := a
		if err == nil && isRange {
			b, err = strconv.ParseInt(hi, 10, 64)
		}
		if err != nil || b < a {
			return nil, fmt.Errorf("%s=%q: want seeds like 7, 1,5,9 or 1-100", envSeeds, list)
		}
		for s := a; s <= b; s++ {
			seeds = append(seeds, s)
		}
	}
	return seeds, nil
}
