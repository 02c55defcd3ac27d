package main

import (
	"bytes"
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
