package main

import (
	"math"
	"testing"

	"github.com/herdhq/herd/store"
)

// The skewed scenario's loads add up to the cores asked, fall with the
// partition's number, and the hottest is below a fair share of its fleet.
func TestZipfCores(t *testing.T) {
	w := zipfCores(32, skewCores, skewExp)
	var sum float64
	for i, x := range w {
		sum += x
		if i > 0 && x >= w[i-1] {
			t.Fatalf("load of partition %d (%v) is not below partition %d's (%v)", i, x, i-1, w[i-1])
		}
	}
	if math.Abs(sum-skewCores) > 1e-9 {
		t.Fatalf("loads add up to %v; want %v", sum, skewCores)
	}
	if fair := skewCores / 4; w[0] >= fair {
		t.Fatalf("the hottest partition asks %v cores, not below a fair share of 4 members (%v)", w[0], fair)
	}
}

// A log read of load reports only is one the reports woke; its bytes are
// those of redisstore's entries, "L\n<session>(\n<partition>\n<load>)+".
func TestLoadReadCost(t *testing.T) {
	rep := store.Change{Kind: store.LoadsReported, Session: "s1", Loads: []store.Load{{Partition: "7", Load: 0.125}, {Partition: "12", Load: 3}}}
	want := int64(len("L\ns1\n7\n0.125\n12\n3"))
	if only, n, b, v := loadReadCost([]store.Change{rep}); !only || n != 1 || b != want || v != 2 {
		t.Errorf("one report: only %v, %d reports, %d bytes, %d loads; want true, 1, %d, 2", only, n, b, v, want)
	}
	if only, n, b, v := loadReadCost([]store.Change{rep, {Kind: store.Claimed}}); only || n != 1 || b != want || v != 2 {
		t.Errorf("a report and a claim: only %v, %d reports, %d bytes, %d loads; want false, 1, %d, 2", only, n, b, v, want)
	}
	if only, _, _, _ := loadReadCost(nil); only {
		t.Error("no entry counts as load reports only")
	}
}
