package main

// herd status's table against its golden file, --watch, and the cost of a status read.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/redisstore"
)

// The text form of a report, byte for byte (a golden test of the layout).
func TestStatusTextGolden(t *testing.T) {
	ep := func(e uint64) *uint64 { return &e }
	ms := func(v int64) *int64 { return &v }
	s := func(v string) *string { return &v }
	rep := &statusReport{Store: "redis://127.0.0.1:6379/0", Groups: []groupStatus{{
		Group: "orders", PartitionSetStored: true,
		Counts: statusCounts{Partitions: 5, Running: 2, Released: 1, Unowned: 1, Malformed: 1, GivenBack: 1},
		Members: []memberStatus{
			{Member: "web-1-4242", Session: "SESSIONA", Weight: 1, TTLLeftMS: 8123, Owned: 2, owned: []string{"0", "1"}},
			{Member: "web-2-77", Session: "SESSIONB", Weight: 2, TTLLeftMS: 950, Owned: 0},
		},
		Listed: listedAll,
		Partitions: []partitionStatus{
			{Partition: "0", InSet: true, State: stateRunning, Member: s("web-1-4242"), Session: s("SESSIONA"), Epoch: ep(1766480000123456),
				SinceMS: ms(125_000), CheckpointBytes: ptr(12), CheckpointAgeMS: ms(1034)},
			{Partition: "1", InSet: true, State: stateRunning, Member: s("web-1-4242"), Session: s("SESSIONA"), Epoch: ep(7), SinceMS: ms(3_700_000),
				GivenBackBy: s("web-2-77"), GivenBackSess: s("SESSIONB")},
			{Partition: "2", InSet: true, State: stateReleased, Epoch: ep(5), CheckpointBytes: ptr(2048), Reason: "released: waiting for a claim"},
			{Partition: "3", InSet: true, State: stateUnowned, Reason: "never claimed: waiting for a claim"},
			{Partition: "x", InSet: true, State: stateMalformed, Reason: "malformed ownership record (bad): no member claims it until it is repaired or deleted"},
		},
		Malformed: []malformedStatus{{Kind: "ownership", ID: "x", Reason: "bad"}},
	}, {
		Group: "empty", Members: []memberStatus{}, Partitions: []partitionStatus{}, Listed: listedAll,
	}}}
	var b bytes.Buffer
	if err := writeText(&b, rep, textStyle{}); err != nil {
		t.Fatal(err)
	}
	want := `group orders: 5 partitions, 2 running, 1 released, 1 unowned, 1 malformed, 1 given back; 2 members

MEMBER      SESSION   WEIGHT  TTL LEFT  OWNED  PARTITIONS
web-1-4242  SESSIONA  1       8.1s      2      0-1
web-2-77    SESSIONB  2       950ms     0      -

PARTITION  STATE      MEMBER      EPOCH             CLAIMED    CHECKPOINT      NOTE
0          running    web-1-4242  1766480000123456  2m05s ago  12 B, 1.0s ago
1          running    web-1-4242  7                 1h01m ago  -               given back by web-2-77: kept off it while its session lives
2          released   -           5                 -          2.0 KiB
3          unowned    -           -                 -          -               never claimed: waiting for a claim
x          malformed  -           -                 -          -               malformed ownership record (bad): no member claims it until it is repaired or deleted

malformed records (left out; members log each once):
  ownership "x": bad

group empty: 0 partitions, 0 running; 0 members
no partition set is stored: members started with a set (herd run --partitions) write it; or use herd partitions set
`
	want = strings.Replace(want, "2.0 KiB\n", "2.0 KiB         released: waiting for a claim\n", 1)
	if got := b.String(); got != want {
		t.Fatalf("text status:\n%s\nwant:\n%s", got, want)
	}

	// Coloured: the same layout once the escapes are taken out.
	b.Reset()
	if err := writeText(&b, rep, textStyle{colour: true}); err != nil {
		t.Fatal(err)
	}
	plain := withoutEscapes(b.String())
	if plain != want {
		t.Fatalf("coloured status without its escapes:\n%s\nwant:\n%s", plain, want)
	}
}

// --watch redraws every --interval and ends without an error when its
// context ends (Ctrl-C, SIGTERM); with --json each redraw is one line.
func TestStatusWatch(t *testing.T) {
	ms := memstore.New()
	if _, err := ms.SetPartitions(t.Context(), "g", store.PartitionSet{Partitions: herd.Numbered(3)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := &lineCounter{n: 3, done: cancel}
	start := time.Now()
	err := runStatus(ctx, w, statusOpts{conn: &connector{scheme: "mem", mem: ms}, group: "g", watch: true, json: true,
		interval: 100 * time.Millisecond, timeout: time.Second, limit: 50, color: "auto"})
	if err != nil {
		t.Fatalf("status --watch ended with %v; want nil when its context ends", err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("3 redraws every 100ms took %v; want at least 200ms", took)
	}
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("%d lines; want 3 redraws", len(lines))
	}
	for _, l := range lines {
		var rep statusReport
		if err := json.Unmarshal([]byte(l), &rep); err != nil || len(rep.Groups) != 1 || rep.Groups[0].Counts.Unowned != 3 {
			t.Fatalf("redraw %q: %v; want a report of 3 unowned partitions", l, err)
		}
	}
}

// lineCounter calls done once n lines were written.
type lineCounter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	n    int
	done func()
}

func (w *lineCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Count(w.buf.String(), "\n") >= w.n {
		w.done()
	}
	return len(p), nil
}

func (w *lineCounter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// BenchmarkStatusRedis reads the status of a group of 10,000 partitions on
// Redis, one member owning them all with a 100-byte checkpoint each: the
// default read (counts and the members, no partition listed: they all run)
// and --all (every partition, so Records of all 10,000 in 10 batches), and
// --jobs (the default read, then the blackboard: another snapshot and
// Records of every key; the checkpoints are no job records, so each is
// decoded and found unreadable).
//
//	go test -run '^$' -bench StatusRedis -benchtime 20x ./cmd/herd/
func BenchmarkStatusRedis(b *testing.B) {
	raw := redistest.Need(b)
	prefix := redistest.Prefix(b, raw, "herdclibench")
	ctx := context.Background()
	st, err := redisstore.Open(ctx, redistest.URL(), redisstore.WithPrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const g, n = "big", 10_000
	if _, err := st.SetPartitions(ctx, g, store.PartitionSet{Partitions: herd.Numbered(n)}); err != nil {
		b.Fatal(err)
	}
	id, err := st.OpenSession(ctx, g, "m", 1, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	cp := bytes.Repeat([]byte{'c'}, 100)
	for start := 0; start < n; start += store.MaxBatch {
		ids := make([]string, store.MaxBatch)
		for i := range ids {
			ids[i] = fmt.Sprint(start + i)
		}
		rs, err := st.ClaimBatch(ctx, g, id, ids)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rs {
			if err := st.Checkpoint(ctx, g, r.Ownership.Partition, r.Ownership.Epoch, cp); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		q    statusQuery
		rows int
	}{{"default", statusQuery{limit: 50}, 0}, {"all", statusQuery{all: true, limit: 50}, n}, {"jobs", statusQuery{limit: 50, jobs: true}, 0}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rep, err := readStatus(ctx, st, "x", g, tc.q)
				if err != nil || rep.Groups[0].Counts.Running != n || len(rep.Groups[0].Partitions) != tc.rows {
					b.Fatalf("status: %v", err)
				}
			}
		})
	}
}

// withoutEscapes is s with the colour escapes of the text status taken out.
func withoutEscapes(s string) string {
	for _, esc := range []string{ansiGreen, ansiYellow, ansiRed, ansiMagenta, ansiPlain, ansiReset} {
		s = strings.ReplaceAll(s, esc, "")
	}
	return s
}
