package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// herd status shows the published loads: per partition, and per member
// the sum of those it runs, in --json and as a LOAD column of the table;
// a group with no load published shows neither (its table is as before).
func TestStatusShowsLoads(t *testing.T) {
	ctx := t.Context()
	ms := memstore.New()
	if _, err := ms.SetPartitions(ctx, "g", store.PartitionSet{Partitions: []store.Partition{{ID: "a"}, {ID: "b"}, {ID: "c"}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := ms.OpenSession(ctx, "g", "m1", 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms.ClaimBatch(ctx, "g", sess, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	g := readGroup(ctx, ms, "g", statusQuery{all: true})
	var b bytes.Buffer
	if err := writeText(&b, &statusReport{Groups: []groupStatus{g}}, textStyle{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "LOAD") || g.Members[0].Load != nil || g.Partitions[0].Load != nil {
		t.Fatalf("status of a group with no load shows loads:\n%s", b.String())
	}

	if err := ms.ReportLoads(ctx, "g", sess, []store.Load{{Partition: "a", Load: 2.5}, {Partition: "b", Load: 0.5}, {Partition: "c", Load: 7}}); err != nil {
		t.Fatal(err)
	}
	g = readGroup(ctx, ms, "g", statusQuery{all: true})
	if l := g.Members[0].Load; l == nil || *l != 3 {
		t.Fatalf("member load %v; want 3 (a and b, which it runs; not c)", l)
	}
	for _, p := range g.Partitions {
		want := map[string]float64{"a": 2.5, "b": 0.5, "c": 7}[p.Partition]
		if p.Load == nil || *p.Load != want {
			t.Fatalf("partition %s load %v; want %v", p.Partition, p.Load, want)
		}
	}
	b.Reset()
	if err := writeText(&b, &statusReport{Groups: []groupStatus{g}}, textStyle{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"OWNED  LOAD  PARTITIONS", "EPOCH", "LOAD  CLAIMED", " 2.5 ", " 7 "} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("status table lacks %q:\n%s", want, b.String())
		}
	}
}

// herd status --jobs shows the published loads of a jobs group's keys: a
// LOAD column of the key table (and of the members'), and "load" on each
// key in --json; a key with no load published has none, and a group with
// no load published shows neither.
func TestStatusJobsShowsLoads(t *testing.T) {
	ctx := t.Context()
	ms := memstore.New()
	if _, err := ms.SetPartitions(ctx, "g", store.PartitionSet{Partitions: []store.Partition{{ID: "westlafcals"}, {ID: "b"}, {ID: "c"}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := ms.OpenSession(ctx, "g", "m1", 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms.ClaimBatch(ctx, "g", sess, []string{"westlafcals", "b"}); err != nil {
		t.Fatal(err)
	}
	q := statusQuery{all: true, jobs: true}
	text := func(g groupStatus) string {
		var b bytes.Buffer
		if err := writeText(&b, &statusReport{Groups: []groupStatus{g}}, textStyle{}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	g := readGroup(ctx, ms, "g", q)
	if len(g.Jobs) != 3 {
		t.Fatalf("%d keys listed; want 3", len(g.Jobs))
	}
	if s := text(g); strings.Contains(s, "LOAD") || g.Jobs[0].Load != nil {
		t.Fatalf("status --jobs of a group with no load shows loads:\n%s", s)
	}

	if err := ms.ReportLoads(ctx, "g", sess, []store.Load{{Partition: "westlafcals", Load: 2.5}, {Partition: "b", Load: 0.5}}); err != nil {
		t.Fatal(err)
	}
	g = readGroup(ctx, ms, "g", q)
	for _, j := range g.Jobs {
		want, ok := map[string]float64{"westlafcals": 2.5, "b": 0.5}[j.Key]
		if !ok && j.Load != nil || ok && (j.Load == nil || *j.Load != want) {
			t.Fatalf("key %s load %v; want %v", j.Key, j.Load, want)
		}
	}
	js, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"key":"westlafcals","owner":"m1","epoch":`) || !strings.Contains(string(js), `"load":2.5`) {
		t.Fatalf("--json lacks the key's load: %s", js)
	}
	s := text(g)
	for _, want := range []string{"OWNED  LOAD  KEYS", "KEY          OWNER  LOAD  RUNNING", "westlafcals  m1     2.5   no", "c            -      -     no"} {
		if !strings.Contains(s, want) {
			t.Fatalf("status --jobs lacks %q:\n%s", want, s)
		}
	}
}
