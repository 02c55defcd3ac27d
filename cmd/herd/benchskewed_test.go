package main

import (
	"math"
	"testing"
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
