package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// status shows a partition given back by a live session (counts and the
// partition's given_back_by), and stops showing it once that session ends
// (the mark is then moot).
func TestStatusGivenBack(t *testing.T) {
	ms := memstore.New()
	ctx := t.Context()
	const group = "g"
	if _, err := ms.SetPartitions(ctx, group, store.PartitionSet{Partitions: []store.Partition{{ID: "a"}, {ID: "b"}}}); err != nil {
		t.Fatal(err)
	}
	s1, err := ms.OpenSession(ctx, group, "m1", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := ms.OpenSession(ctx, group, "m2", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	o, err := store.Claim(ctx, ms, group, "a", s1)
	if err != nil {
		t.Fatal(err)
	}
	if err := ms.GiveBack(ctx, group, "a", s1, o.Epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, ms, group, "a", s2); err != nil {
		t.Fatal(err)
	}
	read := func() groupStatus {
		rep := readJSON(t, func(out *bytes.Buffer) error {
			return runStatus(ctx, out, statusOpts{conn: &connector{scheme: "mem", mem: ms}, group: group, limit: 50,
				json: true, interval: time.Second, timeout: 5 * time.Second, color: "never"})
		})
		return rep.Groups[0]
	}
	g := read()
	var a partitionStatus
	for _, p := range g.Partitions {
		if p.Partition == "a" {
			a = p
		}
	}
	if g.Counts.GivenBack != 1 || ptrVal(a.GivenBackBy) != "m1" || ptrVal(a.GivenBackSess) != s1 || ptrVal(a.Member) != "m2" || a.State != stateRunning {
		t.Fatalf("status: counts %+v, partition a %+v; want 1 given back, a running on m2 and given back by m1", g.Counts, a)
	}
	if err := ms.CloseSession(ctx, group, s1); err != nil {
		t.Fatal(err)
	}
	g = read()
	for _, p := range g.Partitions {
		if p.GivenBackBy != nil || p.GivenBackSess != nil {
			t.Fatalf("status after the giver's session ended: %+v; want no given_back_by", p)
		}
	}
	if g.Counts.GivenBack != 0 {
		t.Fatalf("status after the giver's session ended: counts %+v; want 0 given back", g.Counts)
	}
}
