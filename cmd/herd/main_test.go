package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store/redisstore"
)

func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := runDemo(t.Context(), &out, "mem://", 32, 200*time.Millisecond); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"step 5: a new member joins", "24 partitions moved, minimum 24", "at most 1 handler(s)"} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q:\n%s", want, s)
		}
	}
}

func TestBadInput(t *testing.T) {
	for _, url := range []string{"", "nothing", "ftp://x", "redis://127.0.0.1:1/notanumber"} {
		err := runDemo(t.Context(), &bytes.Buffer{}, url, 4, time.Second)
		if err == nil {
			t.Errorf("demo --store %q: no error", url)
		}
	}
	if err := runDemo(t.Context(), &bytes.Buffer{}, "mem://", 0, time.Second); err == nil {
		t.Error("demo --partitions 0: no error")
	}
	if err := runBench(t.Context(), &bytes.Buffer{}, benchOpts{storeURL: "mem://", scenarios: []string{"nope"}, ttl: time.Second}); err == nil {
		t.Error("bench --scenario nope: no error")
	}
	if err := runBench(t.Context(), &bytes.Buffer{}, benchOpts{storeURL: "mem://", ttl: time.Millisecond}); err == nil {
		t.Error("bench --ttl 1ms: no error")
	}
}

// benchJSON runs bench and checks the thresholds on every scenario.
func benchJSON(t *testing.T, storeURL string, ttl time.Duration) {
	t.Helper()
	var out bytes.Buffer
	o := benchOpts{storeURL: storeURL, jsonOut: true, ttl: ttl, scenarios: []string{"scale-out", "leave", "crash"}}
	if err := runBench(t.Context(), &out, o); err != nil {
		t.Fatalf("bench: %v", err)
	}
	sc := bufio.NewScanner(&out)
	n := 0
	for sc.Scan() {
		var r benchResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		n++
		limit := map[string]float64{"scale-out": 1, "leave": 0.2, "crash": ttl.Seconds() + 1}[r.Scenario]
		if r.SecondsToBalance > limit || r.Moves != r.MinMoves || r.MaxConcurrentOwners != 1 {
			t.Errorf("%s on %s: %+v; want balanced within %gs, moves == min_moves, max_concurrent_owners 1", r.Scenario, r.Store, r, limit)
		}
	}
	if n != 3 {
		t.Fatalf("bench printed %d JSON lines, want 3:\n%s", n, out.String())
	}
}

func TestBenchMem(t *testing.T) { benchJSON(t, "mem://", 500*time.Millisecond) }

func TestBenchRedis(t *testing.T) {
	url := os.Getenv("HERD_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	st, err := redisstore.Open(ctx, url)
	if err != nil {
		if os.Getenv("HERD_REQUIRE_SERVERS") == "1" {
			t.Fatalf("Redis at %s is required (HERD_REQUIRE_SERVERS=1) but not reachable: %v", url, err)
		}
		t.Skipf("Redis at %s not reachable (set HERD_REDIS_URL): %v", url, err)
	}
	st.Close()
	benchJSON(t, url, 500*time.Millisecond)
}
