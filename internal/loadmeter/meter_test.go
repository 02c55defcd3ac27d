package loadmeter

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestSampleRateAndThreshold: the measure is the marks' rate; a load is
// published once, then again only when it changed beyond the thresholds:
// a jump of more than 1.5 times at once, a smaller change smoothed.
func TestSampleRateAndThreshold(t *testing.T) {
	m := New(30 * time.Second)
	a, b := &Counter{}, &Counter{}
	m.Start("a", a, t0, 0, false)
	m.Start("b", b, t0, 0, false)
	marks := func(n int) {
		for range n {
			a.Mark()
		}
	}
	marks(300)
	got := m.Sample(t0.Add(30*time.Second), store.MaxLoads)
	want := []store.Load{{Partition: "a", Load: 10}, {Partition: "b", Load: 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("first Sample = %v; want %v", got, want)
	}
	// 20 % more: smoothed (10.1), nothing to publish, and no more after
	// twenty such samples of noise around 10.
	marks(360)
	if got := m.Sample(t0.Add(60*time.Second), store.MaxLoads); len(got) != 0 {
		t.Fatalf("Sample after a rate 20 %% higher = %v; want nothing", got)
	}
	for i := range 20 {
		marks([]int{240, 360}[i%2])
		if got := m.Sample(t0.Add(time.Duration(90+30*i)*time.Second), store.MaxLoads); len(got) != 0 {
			t.Fatalf("Sample %d of noise = %v; want nothing", i, got)
		}
	}
	// The rate doubles: a real change, published at once.
	marks(600)
	got = m.Sample(t0.Add(690*time.Second), store.MaxLoads)
	if !slices.Equal(got, []store.Load{{Partition: "a", Load: 20}}) {
		t.Fatalf("Sample after the rate doubled = %v; want a at 20", got)
	}
}

// TestStartFromPublished: a partition that moves starts from its published
// load and publishes nothing while its measure agrees; a handler's own
// load replaces the marks.
func TestStartFromPublished(t *testing.T) {
	m := New(10 * time.Second)
	c := &Counter{}
	m.Start("p", c, t0, 5, true)
	if got := m.Sample(t0.Add(time.Second), 10); len(got) != 0 {
		t.Fatalf("Sample just after a start from a published 5 = %v; want nothing", got)
	}
	if m.Total() != 5 {
		t.Fatalf("Total = %v; want the published 5", m.Total())
	}
	c.Report(10)
	got := m.Sample(t0.Add(2*time.Second), 10)
	if !slices.Equal(got, []store.Load{{Partition: "p", Load: 10}}) {
		t.Fatalf("Sample after ReportLoad(10) = %v; want p at 10", got)
	}
	c.Report(math.NaN())
	c.Report(-1)
	if got := m.Sample(t0.Add(3*time.Second), 10); len(got) != 0 {
		t.Fatalf("Sample after invalid reports = %v; want nothing (they are ignored)", got)
	}
	m.Stop("p", &Counter{}) // another claim's counter: ignored
	m.Stop("p", c)
	if m.Total() != 0 {
		t.Fatalf("Total after Stop = %v; want 0", m.Total())
	}
}

// TestSampleBounded: at most max loads, the largest changes first.
func TestSampleBounded(t *testing.T) {
	m := New(time.Second)
	for i, p := range []string{"a", "b", "c"} {
		c := &Counter{}
		m.Start(p, c, t0, 0, true)
		c.Report(float64(i + 1))
	}
	got := m.Sample(t0.Add(time.Second), 2)
	if !slices.Equal(got, []store.Load{{Partition: "b", Load: 2}, {Partition: "c", Load: 3}}) {
		t.Fatalf("Sample(max 2) = %v; want b and c", got)
	}
	m.Unpublish(got)
	if got := m.Sample(t0.Add(2*time.Second), 10); len(got) != 3 {
		t.Fatalf("Sample after Unpublish = %v; want a, b and c", got)
	}
}

// TestAlign: published loads by partition, the mean for the others; equal
// when none or all the same.
func TestAlign(t *testing.T) {
	ids := []string{"a", "b", "c", "d"}
	id := func(i int) string { return ids[i] }
	got, unequal := Align(nil, 4, id, []store.Load{{Partition: "a", Load: 1}, {Partition: "c", Load: 3}, {Partition: "zz", Load: 9}})
	if !unequal || !slices.Equal(got, []float64{1, 2, 3, 2}) {
		t.Fatalf("Align = %v, %v; want [1 2 3 2], unequal", got, unequal)
	}
	if _, unequal := Align(got, 4, id, nil); unequal {
		t.Fatal("Align with no loads is unequal; want equal")
	}
	if _, unequal := Align(got, 4, id, []store.Load{{Partition: "b", Load: 4}}); unequal {
		t.Fatal("Align with one load (the others at its mean) is unequal; want equal")
	}
}

// TestOwnOnly: a meter of reported loads only measures nothing from the
// marks (a job's record checkpoints); a reported load is measured.
func TestOwnOnly(t *testing.T) {
	m := NewOwnOnly(30 * time.Second)
	a, b := &Counter{}, &Counter{}
	m.Start("a", a, t0, 0, false)
	m.Start("b", b, t0, 0, false)
	for range 300 {
		a.Mark()
		b.Mark()
	}
	b.Report(0.25)
	got := m.Sample(t0.Add(30*time.Second), store.MaxLoads)
	if want := []store.Load{{Partition: "b", Load: 0.25}}; !slices.Equal(got, want) {
		t.Fatalf("Sample = %v; want %v (a's marks are no load)", got, want)
	}
	if got := m.Sample(t0.Add(60*time.Second), store.MaxLoads); len(got) != 0 {
		t.Fatalf("second Sample = %v; want nothing", got)
	}
}

// TestStopKeep: the measure of a partition stopped with StopKeep stays
// for Measure until DropKept or the partition starts again; Stop keeps
// nothing, and an unprimed partition has no measure.
func TestStopKeep(t *testing.T) {
	m := New(10 * time.Second)
	a, b, c := &Counter{}, &Counter{}, &Counter{}
	m.Start("a", a, t0, 0.12345, true)
	m.Start("b", b, t0, 2, true)
	m.Start("c", c, t0, 0, false)
	if v, ok := m.Measure("a"); !ok || v != 0.123 {
		t.Fatalf("Measure(a) running = %v, %v; want 0.123 (rounded as published)", v, ok)
	}
	m.StopKeep("a", a)
	m.Stop("b", b)
	m.StopKeep("c", c)
	if v, ok := m.Measure("a"); !ok || v != 0.123 {
		t.Fatalf("Measure(a) after StopKeep = %v, %v; want 0.123", v, ok)
	}
	if _, ok := m.Measure("b"); ok {
		t.Fatal("Measure(b) after Stop: want none")
	}
	if _, ok := m.Measure("c"); ok {
		t.Fatal("Measure(c), never measured: want none")
	}
	if m.Total() != 0 {
		t.Fatalf("Total after the stops = %v; want 0 (kept measures are not running)", m.Total())
	}
	m.DropKept()
	if _, ok := m.Measure("a"); ok {
		t.Fatal("Measure(a) after DropKept: want none")
	}
	m.Start("a", a, t0, 1, true)
	m.StopKeep("a", a)
	m.Start("a", &Counter{}, t0, 0, false)
	if _, ok := m.Measure("a"); ok {
		t.Fatal("Measure(a) started again, not measured yet: want none (the kept measure goes)")
	}
}
