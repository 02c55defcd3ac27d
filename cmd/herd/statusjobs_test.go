package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store/memstore"
)

// status --jobs against two jobs.Schedulers on the in-process store, in
// virtual time: every 10 minutes, westlafcals and aroundfred succeed,
// networksierra fails (its error carries a store URL with a password),
// localist and zz-bad run until they are stopped, and zz-bad's record is
// then overwritten by something that is not a job record. The JSON agrees
// with the schedulers and the records, the unreadable record costs its key
// alone, --limit lists only the keys that need a look, and the table has a
// line per key.
func TestStatusJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		ms := memstore.New()
		conn := &connector{scheme: "mem", mem: ms}
		const group = "aggregate"
		keys := []string{"westlafcals", "networksierra", "localist", "aroundfred", "zz-bad"}
		run := func(ctx context.Context, r jobs.Run) error {
			switch r.Key {
			case "networksierra":
				return errors.New("exit status 7 (redis://:hunter2@db:6379)")
			case "localist", "zz-bad":
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}
		var ss []*jobs.Scheduler
		for _, m := range []string{"m1", "m2"} {
			s, err := jobs.Start(ctx, jobs.Config{Store: sharedStore{ms}, Group: group, Member: m, Keys: keys,
				Every: 10 * time.Minute, Run: run, RetryDelay: time.Hour, RetryMax: time.Hour,
				SessionTTL: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ss = append(ss, s)
		}
		defer func() {
			for _, s := range ss {
				lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := s.Leave(lctx); err != nil {
					t.Errorf("leave: %v", err)
				}
				cancel()
			}
		}()
		time.Sleep(25 * time.Minute) // every key has run, twice for most
		owners := map[string]string{}
		for _, s := range ss {
			for _, k := range s.Member().Owned() {
				owners[k] = s.Member().ID()
			}
		}
		if len(owners) != len(keys) {
			t.Fatalf("owners %v; want every key owned", owners)
		}
		snap, err := ms.Snapshot(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range snap.Owners {
			if o.Partition == "zz-bad" {
				if err := ms.Checkpoint(ctx, group, o.Partition, o.Epoch, []byte("{oops")); err != nil {
					t.Fatal(err)
				}
			}
		}

		read := func(o statusOpts) statusReport {
			return readJSON(t, func(out *bytes.Buffer) error {
				o.conn, o.group, o.jobs, o.json, o.interval, o.timeout, o.color = conn, group, true, true, time.Second, 5*time.Second, "never"
				return runStatus(ctx, out, o)
			})
		}
		now := time.Now()
		rep := read(statusOpts{limit: 50})
		g := rep.Groups[0]
		if want := (jobsCounts{Keys: 5, Running: 1, Failed: 1, Unreadable: 1}); g.JobsCounts == nil || *g.JobsCounts != want {
			t.Fatalf("jobs_counts %+v; want %+v", g.JobsCounts, want)
		}
		if ptrVal(g.JobsListed) != listedAll || g.JobsNotListed == nil || *g.JobsNotListed != 0 || len(g.Jobs) != 5 {
			t.Fatalf("jobs_listed %v, jobs_not_listed %v, %d jobs; want all, 0, 5", g.JobsListed, g.JobsNotListed, len(g.Jobs))
		}
		sorted := slices.Clone(keys)
		slices.Sort(sorted)
		for i, j := range g.Jobs {
			if j.Key != sorted[i] || ptrVal(j.Owner) != owners[j.Key] || j.Epoch == nil {
				t.Fatalf("job %d: %+v; want key %s owned by %s", i, j, sorted[i], owners[j.Key])
			}
			if j.Key == "zz-bad" {
				if j.RecordError == nil || !strings.Contains(*j.RecordError, "not JSON of a job record") || j.RecordOwner != nil || j.Running || j.Runs != 0 {
					t.Fatalf("zz-bad: %+v; want only its owner and the record's error", j)
				}
				continue
			}
			for _, ts := range []*string{j.Slot, j.LastStart, j.LastStop, j.NextDue} {
				if ts == nil {
					continue
				}
				p, err := time.Parse(time.RFC3339, *ts)
				if err != nil || !strings.HasSuffix(*ts, "Z") || strings.Contains(*ts, ".") || p.After(now.Add(10*time.Minute)) || p.Before(now.Add(-30*time.Minute)) {
					t.Fatalf("%s: time %q (%v); want RFC 3339 UTC to the second, within the test's half hour", j.Key, *ts, err)
				}
			}
			if j.RecordError != nil || ptrVal(j.RecordOwner) != owners[j.Key] || ptrVal(j.RecordEpoch) != *j.Epoch || j.Slot == nil || j.LastStart == nil || j.Attempt < 1 || j.RecordAgeMS == nil {
				t.Fatalf("%s: %+v; want a record written by its owner", j.Key, j)
			}
			switch j.Key {
			case "localist":
				if !j.Running || j.LastStop != nil || j.NextDue != nil || j.Result != nil || j.Runs != 0 {
					t.Fatalf("localist: %+v; want running since its first slot, no stop, nothing due", j)
				}
			case "networksierra":
				if j.Running || ptrVal(j.Result) != jobs.ResultError || ptrVal(j.Error) != "exit status 7 (redis://:xxxxx@db:6379)" || j.Runs < 2 || j.Failures != j.Runs || j.NextDue == nil {
					t.Fatalf("networksierra: %+v; want failed runs, the error with its password hidden, a next run due", j)
				}
			default:
				if j.Running || ptrVal(j.Result) != jobs.ResultOK || j.Error != nil || j.Runs < 2 || j.Failures != 0 || j.Missed != 0 || j.LastStop == nil || j.NextDue == nil {
					t.Fatalf("%s: %+v; want runs ended ok, the next one due", j.Key, j)
				}
			}
		}

		// --limit under the number of keys: only those that need a look.
		g = read(statusOpts{limit: 3}).Groups[0]
		var listed []string
		for _, j := range g.Jobs {
			listed = append(listed, j.Key)
		}
		if ptrVal(g.JobsListed) != listedAttention || ptrVal(g.JobsNotListed) != 3 || !slices.Equal(listed, []string{"networksierra", "zz-bad"}) {
			t.Fatalf("--limit 3: listed %v %q, %v not listed; want attention [networksierra zz-bad], 3", g.JobsListed, listed, g.JobsNotListed)
		}

		// The table: one line per key, aligned on the header.
		var out bytes.Buffer
		if err := runStatus(ctx, &out, statusOpts{conn: conn, group: group, jobs: true, interval: time.Second, timeout: 5 * time.Second, limit: 50, color: "never"}); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		tables := splitTables(text)
		if first := strings.SplitN(text, "\n", 2)[0]; first != "group aggregate: 5 keys, 1 running, 1 failed, 1 unreadable; 2 members" {
			t.Fatalf("first line %q\n%s", first, text)
		}
		if len(tables) != 3 || len(tables[1]) != 6 || !strings.HasPrefix(tables[1][0], "KEY ") {
			t.Fatalf("want a member table, a table of 5 keys and the unreadable record:\n%s", text)
		}
		checkAligned(t, tables[1])
		for _, want := range []string{
			"localist  " + owners["localist"] + "  yes, for 2",
			"networksierra  " + owners["networksierra"] + "  no  ",
			"zz-bad  " + owners["zz-bad"] + "  -  -  -  unreadable record  -  -  -",
			`key "zz-bad": jobs: record is not JSON of a job record`,
			"error: exit status 7 (redis://:xxxxx@db:6379)  in ",
		} {
			if !strings.Contains(squeeze(text), want) {
				t.Errorf("the table has no %q:\n%s", want, text)
			}
		}
		if strings.Contains(text, "hunter2") || strings.Contains(text, "\x1b[") {
			t.Errorf("a password or a colour in the table:\n%s", text)
		}
	})
}

// splitTables splits text into its blocks of lines separated by empty
// lines, the first line (the group's header) left out.
func splitTables(text string) [][]string {
	var tables [][]string
	var cur []string
	for _, l := range strings.Split(text, "\n")[1:] {
		if l == "" {
			if cur != nil {
				tables = append(tables, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	return tables
}

// checkAligned checks that every row of a table starts a cell where its
// header does, and ends without spaces.
func checkAligned(t *testing.T, tb []string) {
	t.Helper()
	header := tb[0]
	var starts []int
	for i := range header {
		if header[i] != ' ' && (i == 0 || i >= 2 && header[i-1] == ' ' && header[i-2] == ' ') {
			starts = append(starts, i)
		}
	}
	for _, row := range tb[1:] {
		if strings.HasSuffix(row, " ") {
			t.Fatalf("row %q ends with spaces", row)
		}
		for _, s := range starts[1:] {
			if s >= len(row) {
				break
			}
			if row[s] == ' ' || row[s-1] != ' ' {
				t.Fatalf("row %q: no cell starts at column %d, where the header's does:\n%s", row, s, strings.Join(tb, "\n"))
			}
		}
	}
}

// squeeze replaces runs of spaces with two spaces, so that a row can be
// matched whatever the columns' widths.
func squeeze(s string) string {
	for strings.Contains(s, "   ") {
		s = strings.ReplaceAll(s, "   ", "  ")
	}
	return s
}

// The blackboard table, byte for byte.
func TestStatusJobsTextGolden(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *string { return utcSeconds(now.Add(d)) }
	s := func(v string) *string { return &v }
	e := func(v uint64) *uint64 { return &v }
	rep := &statusReport{Store: "redis://127.0.0.1:6379/0", Time: now, Groups: []groupStatus{{
		Group: "aggregate", PartitionSetStored: true,
		Members: []memberStatus{
			{Member: "web-1", Session: "SA", Weight: 1, TTLLeftMS: 9000, Owned: 3, owned: []string{"aroundfred", "localist", "zz-bad"}},
			{Member: "web-2", Session: "SB", Weight: 1, TTLLeftMS: 8000, Owned: 1, owned: []string{"westlafcals"}},
		},
		JobsCounts: &jobsCounts{Keys: 5, Running: 1, Failed: 1, Unowned: 1, Unreadable: 1}, JobsListed: s(listedAll), JobsNotListed: ptr(0),
		Jobs: []jobStatus{
			{Key: "aroundfred", Owner: s("web-1"), Epoch: e(4), RecordOwner: s("web-1"), RecordEpoch: e(4), Slot: at(-2 * time.Hour),
				Attempt: 1, LastStart: at(-2 * time.Hour), LastStop: at(-2*time.Hour + 135*time.Second), Result: s("ok"),
				NextDue: at(6 * time.Hour), Runs: 12, Missed: 2},
			{Key: "localist", Owner: s("web-1"), Epoch: e(3), RecordOwner: s("web-1"), RecordEpoch: e(3), Running: true, Slot: at(-3 * time.Minute),
				Attempt: 1, LastStart: at(-3 * time.Minute), LastStop: at(-8 * time.Hour), Result: s("ok"), Runs: 7},
			{Key: "networksierra", RecordOwner: s("web-3"), RecordEpoch: e(2), Slot: at(-time.Hour), Attempt: 2,
				LastStart: at(-50 * time.Minute), LastStop: at(-49 * time.Minute), Result: s("error"),
				Error: s("exit status 7: could not reach the calendar feed of Sonora\nsecond line"), NextDue: at(-9 * time.Minute), Retry: true, Runs: 3, Failures: 2},
			{Key: "westlafcals", Owner: s("web-2"), Epoch: e(9), RecordOwner: s("web-1"), RecordEpoch: e(5), Running: true, Slot: at(-time.Minute),
				Attempt: 1, LastStart: at(-time.Minute), Runs: 0},
			{Key: "zz-bad", Owner: s("web-1"), Epoch: e(1), RecordError: s("jobs: record is not JSON of a job record (bad): corrupt record")},
		},
	}}}
	var b bytes.Buffer
	if err := writeText(&b, rep, textStyle{}); err != nil {
		t.Fatal(err)
	}
	want := `group aggregate: 5 keys, 1 running, 1 failed, 1 unowned, 1 unreadable; 2 members

MEMBER  SESSION  WEIGHT  TTL LEFT  OWNED  KEYS
web-1   SA       1       9.0s      3      aroundfred,localist,zz-bad
web-2   SB       1       8.0s      1      westlafcals

KEY            OWNER  RUNNING          LAST START  LAST STOP   RESULT                                            NEXT DUE           MISSED  RUNS
aroundfred     web-1  no               2h00m ago   1h57m ago   ok                                                in 6h00m           2       12
localist       web-1  yes, for 3m00s   3m00s ago   8h00m ago   ok                                                -                  0       7
networksierra  -      no               50m00s ago  49m00s ago  error: exit status 7: could not reach the calen…  9m00s ago (retry)  0       3
westlafcals    web-2  stopped mid-run  1m00s ago   -           -                                                 -                  0       0
zz-bad         web-1  -                -           -           unreadable record                                 -                  -       -

unreadable records (their keys start afresh at their next run):
  key "zz-bad": jobs: record is not JSON of a job record (bad): corrupt record
`
	if got := b.String(); got != want {
		t.Fatalf("text:\n%s\nwant:\n%s", got, want)
	}
	b.Reset()
	if err := writeText(&b, rep, textStyle{colour: true}); err != nil {
		t.Fatal(err)
	}
	plain := withoutEscapes(b.String())
	if plain != want {
		t.Fatalf("coloured text without its escapes:\n%s\nwant:\n%s", plain, want)
	}
	if !strings.Contains(b.String(), ansiGreen+"yes, for 3m00s"+ansiReset) || !strings.Contains(b.String(), ansiMagenta+"unreadable record"+ansiReset) {
		t.Fatalf("no green running or magenta unreadable record:\n%q", b.String())
	}
}
