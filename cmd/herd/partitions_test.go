package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/redisstore"
)

// partitions set and show on Redis: a set written by set comes back from
// show as the same SPEC (and as JSON), a running member follows it, an
// empty SPEC is refused unless --allow-empty, @file works, and the command
// leaves no key behind once the group is deleted.
func TestPartitionsSetShowRedis(t *testing.T) {
	u, prefix, raw := redisURL(t)
	const g = "cities"
	base := []string{"--store", u, "--group", g}
	show := func() string {
		t.Helper()
		out, err := execute(t, append([]string{"partitions", "show"}, base...)...)
		if err != nil {
			t.Fatalf("partitions show: %v", err)
		}
		return out
	}
	set := func(spec string, extra ...string) (string, error) {
		return execute(t, append(append(append([]string{"partitions", "set"}, base...), extra...), spec)...)
	}

	// (execute gives the command one buffer for stdout and stderr.)
	if out, err := execute(t, append([]string{"partitions", "show"}, base...)...); exitCode(err) != exitNotFound || out != "" {
		t.Fatalf("partitions show of a group never written: %q, %v; want group not found (exit status %d)", out, err, exitNotFound)
	}
	out, err := set("0-9,12,eu west,us")
	if err != nil || out != "group \"cities\": partition set replaced, 13 partitions\n" {
		t.Fatalf("partitions set: %q, %v", out, err)
	}
	if out := show(); out != "0-9,12,eu west,us\n" {
		t.Fatalf("partitions show: %q; want the SPEC given back", out)
	}
	jsonOut, err := execute(t, append([]string{"partitions", "show", "--json"}, base...)...)
	var doc struct {
		Group      string `json:"group"`
		Stored     bool   `json:"stored"`
		Partitions []struct {
			ID     string `json:"id"`
			Weight int    `json:"weight"`
		} `json:"partitions"`
	}
	if err != nil || json.Unmarshal([]byte(jsonOut), &doc) != nil || doc.Group != g || !doc.Stored || len(doc.Partitions) != 13 ||
		doc.Partitions[10].ID != "12" || doc.Partitions[0].Weight != 1 {
		t.Fatalf("partitions show --json: %q, %v", jsonOut, err)
	}

	// A member that follows the stored set runs what set says.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	st, err := redisstore.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := herd.Join(context.Background(), st, herd.Config{Group: g, Member: "m", SessionTTL: 2 * time.Second, Logger: slog.New(slog.DiscardHandler),
		Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Leave(context.Background()) }()
	waitOwned := func(want []string) {
		t.Helper()
		for !slices.Equal(m.Owned(), want) {
			if ctx.Err() != nil {
				t.Fatalf("member owns %q; want %q", m.Owned(), want)
			}
			time.Sleep(10 * time.Millisecond) // polling the member for a condition
		}
	}
	file := filepath.Join(t.TempDir(), "ids")
	if err := os.WriteFile(file, []byte("# cities\nlyon\n\n  paris  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := set("@" + file); err != nil {
		t.Fatalf("partitions set @file: %v", err)
	}
	waitOwned([]string{"lyon", "paris"})
	if out := show(); out != "lyon,paris\n" {
		t.Fatalf("partitions show after @file: %q", out)
	}

	// Weights, "ID<TAB>WEIGHT" in a file: stored, and shown as such a
	// file, which set reads back as the same set.
	weighted := filepath.Join(t.TempDir(), "weighted")
	if err := os.WriteFile(weighted, []byte("city:lyon\t3\nparis\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := set("@" + weighted); err != nil {
		t.Fatalf("partitions set @file with weights: %v", err)
	}
	if out := show(); out != "city:lyon\t3\nparis\t1\n" {
		t.Fatalf("partitions show of a weighted set: %q", out)
	}
	if err := os.WriteFile(weighted, []byte(show()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := set("@" + weighted); err != nil || show() != "city:lyon\t3\nparis\t1\n" {
		t.Fatalf("the shown weighted set read back: %v, %q", err, show())
	}
	if _, err := set("@" + file); err != nil {
		t.Fatal(err)
	}
	waitOwned([]string{"lyon", "paris"})

	// Empty: refused, then allowed; the member stops everything.
	for _, spec := range []string{"", "@" + filepath.Join(t.TempDir(), "empty")} {
		if strings.HasPrefix(spec, "@") {
			if err := os.WriteFile(spec[1:], []byte("# nothing\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, err = set(spec)
		if err == nil || !strings.Contains(err.Error(), "--allow-empty") {
			t.Fatalf("partitions set %q: %v; want a refusal naming --allow-empty", spec, err)
		}
	}
	if out := show(); out != "lyon,paris\n" {
		t.Fatalf("a refused set changed the set: %q", out)
	}
	if _, err := set("", "--allow-empty"); err != nil {
		t.Fatalf("partitions set --allow-empty \"\": %v", err)
	}
	waitOwned([]string{})
	if out := show(); out != "\n" {
		t.Fatalf("partitions show of an empty set: %q; want an empty line", out)
	}
	if err := m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := execute(t, "group", "delete", "--store", u, "--group", g); err != nil {
		t.Fatal(err)
	}
	noKeys(t, raw, prefix)
}

// formatSpec writes ids as a SPEC that parsePartitionSpec reads back as the
// same ids, for random sets of numbers and names; ids a SPEC cannot hold
// are refused.
func TestFormatSpecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"eu", "us west", "a:b", "x-y", "0x", "007", "日本", "-", "5-"}
	for range 500 {
		seen := map[string]bool{}
		var ids []string
		for range rng.IntN(40) {
			var id string
			if rng.IntN(3) == 0 {
				id = names[rng.IntN(len(names))]
			} else {
				id = strconv.Itoa(rng.IntN(60))
			}
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		slices.SortFunc(ids, compareIDs)
		spec, ok := formatSpec(ids)
		if !ok {
			t.Fatalf("formatSpec(%q) refused ids a SPEC can hold", ids)
		}
		ps, err := parsePartitionSpec("SPEC", spec)
		if err != nil {
			t.Fatalf("formatSpec(%q) = %q, which does not parse: %v", ids, spec, err)
		}
		got := make([]string, len(ps))
		for i, p := range ps {
			got[i] = p.ID
		}
		if !slices.Equal(got, ids) && !(len(got) == 0 && len(ids) == 0) {
			t.Fatalf("formatSpec(%q) = %q, read back as %q", ids, spec, got)
		}
	}
	for _, ids := range [][]string{{"a,b"}, {"1-2"}, {"@file"}} {
		if spec, ok := formatSpec(ids); ok {
			t.Fatalf("formatSpec(%q) = %q; want it refused (the SPEC would read otherwise)", ids, spec)
		}
	}
}

// status --watch keeps redrawing through a store outage, showing the error
// without the URL's password, and goes on once the store is back.
func TestStatusWatchOutageHidesPassword(t *testing.T) {
	redistest.Need(t)
	srv := redistest.StartServer(t)
	const pw = "wAtch-s3cret"
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	if err := c.ConfigSet(ctx, "requirepass", pw).Err(); err != nil {
		t.Fatal(err)
	}
	u := "redis://:" + pw + "@" + srv.Addr() + "/0?prefix=w"
	st, err := redisstore.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.SetPartitions(ctx, "g", store.PartitionSet{Partitions: herd.Numbered(2)}); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w := &lineCounter{n: 1 << 30, done: func() {}}
	done := make(chan error, 1)
	go func() {
		done <- runStatus(wctx, w, statusOpts{storeURL: u, group: "g", watch: true, json: true,
			interval: 100 * time.Millisecond, timeout: 300 * time.Millisecond, limit: 50, color: "never"})
	}()
	waitLines := func(what string, cond func(string) bool) {
		t.Helper()
		for !cond(w.String()) {
			if ctx.Err() != nil {
				t.Fatalf("waiting for %s; output:\n%s", what, w.String())
			}
			time.Sleep(20 * time.Millisecond) // polling the output for a condition
		}
	}
	waitLines("a first report", func(s string) bool { return strings.Contains(s, `"unowned":2`) })
	srv.Kill()
	waitLines("an error line", func(s string) bool { return strings.Contains(s, `"error":`) && strings.Contains(s, "unavailable") })
	srv.Start() // empty, without the password
	stop()
	if err := <-done; err != nil {
		t.Fatalf("status --watch: %v", err)
	}
	if out := w.String(); strings.Contains(out, pw) {
		t.Fatalf("status --watch output shows the password:\n%s", out)
	}
	for _, l := range strings.Split(strings.TrimSpace(w.String()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil || v["store"] != "redis://:xxxxx@"+srv.Addr()+"/0?prefix=w" {
			t.Fatalf("line %q: %v; want JSON naming the store without its password", l, err)
		}
	}
}
