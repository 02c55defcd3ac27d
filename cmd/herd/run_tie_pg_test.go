package main

// herd run on PostgreSQL with its sessions tied (--tie-session auto): the
// server ending a live member's tied connection.

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd/internal/pgtest"
)

// envTerminateRounds sets the rounds of TestRunE2ETerminatePostgres
// (default 3; scripts/tie-terminate runs 100).
const envTerminateRounds = "HERD_TIE_TERMINATE_ROUNDS"

// Three herd run members share six partitions through PostgreSQL, their
// sessions tied by default. Round after round, the server ends one
// member's tied connection (pg_terminate_backend) while the member lives:
// the member kills its children at once and opens a new session, the
// others take its partitions over after the grace (250 ms), and no
// partition ever has two live children (the flock in the child).
func TestRunE2ETerminatePostgres(t *testing.T) {
	rounds := 3
	if s := os.Getenv(envTerminateRounds); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a count of rounds", envTerminateRounds, s)
		}
		rounds = n
	}
	u, schema := pgURL(t)
	dir := t.TempDir()
	buildHerd(t)
	script := filepath.Join(dir, "child.sh")
	if err := os.WriteFile(script, []byte(e2eChild), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "log")
	env := []string{"RUN_LOG=" + logPath, "RUN_DIR=" + dir}
	members := map[string]*member{}
	for _, name := range []string{"m1", "m2", "m3"} {
		members[name] = startRunIn(t, name, dir, env, "--store", u, "--group", "e2e-terminate", "--member", name,
			"--partitions", "0-5", "--ttl", "10s", "--max-shutdown", "2s", "--restart-delay", "50ms", "--restart-max", "500ms",
			"--", "/bin/sh", script)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(rounds)*20*time.Second+time.Minute)
	defer cancel()
	db, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	S := pgx.Identifier{schema}.Sanitize()
	ties := func() int {
		var n int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM "+S+".ties WHERE cut IS NULL").Scan(&n); err != nil {
			return -1 // the table is made by the first tie
		}
		return n
	}
	balanced := func() bool {
		per := map[string]int{}
		for _, r := range current(readEvents(t, logPath)) {
			if r.saves < 1 {
				return false
			}
			per[r.start.member]++
		}
		return per["m1"] == 2 && per["m2"] == 2 && per["m3"] == 2 && ties() == 3
	}
	var took []time.Duration
	for round := range rounds {
		eventually(t, 60*time.Second, "six partitions running, two per member, saved, three ties", balanced)
		var id, victim string
		if err := db.QueryRow(ctx, "SELECT x.id, s.member FROM "+S+".ties x JOIN "+S+".sessions s ON s.gid = x.gid AND s.id = x.id WHERE x.cut IS NULL ORDER BY random() LIMIT 1").Scan(&id, &victim); err != nil {
			t.Fatal(err)
		}
		var moved []string
		for p, r := range current(readEvents(t, logPath)) {
			if r.start.member == victim {
				moved = append(moved, p)
			}
		}
		mark := len(readEvents(t, logPath))
		at := time.Now()
		var n int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) x", "herd tie "+id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("round %d: terminated %d backends of %s's tie (%v); want 1", round, n, victim, err)
		}
		eventually(t, 30*time.Second, "the partitions of the member whose connection ended running again", func() bool {
			evs := readEvents(t, logPath)
			for _, p := range moved {
				found := false
				for _, ev := range evs[min(mark, len(evs)):] {
					found = found || ev.kind == "start" && ev.part == p
				}
				if !found {
					return false
				}
			}
			return true
		})
		took = append(took, time.Since(at))
	}
	t.Logf("%d rounds: the partitions of the member whose tied connection the server ended ran again after %v (median %v)",
		rounds, minMax(took), median(took))
	for _, name := range []string{"m1", "m2", "m3"} {
		if err := members[name].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"m1", "m2", "m3"} {
		if err := members[name].wait(t, 30*time.Second); err != nil {
			t.Errorf("%s: %v; want a clean exit after SIGTERM", name, err)
		}
	}
	for _, ev := range readEvents(t, logPath) {
		if ev.kind == "overlap" {
			t.Errorf("partition %s: a child of %s started while another child of it was alive", ev.part, ev.member)
		}
	}
}

// median and minMax summarise durations for a test's log.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2].Round(time.Millisecond)
}

func minMax(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	return slices.Min(ds).Round(time.Millisecond).String() + "-" + slices.Max(ds).Round(time.Millisecond).String()
}
