package store

import (
	"slices"
	"testing"
)

// TestMergeLoads: a merge sets the loads given (new partitions added in
// order, known ones replaced) and leaves the list it merged into as it
// was, since snapshots share it.
func TestMergeLoads(t *testing.T) {
	cur := []Load{{"b", 1}, {"d", 2}}
	keep := slices.Clone(cur)
	got := MergeLoads(cur, []Load{{"e", 5}, {"a", 0}, {"d", 3}})
	want := []Load{{"a", 0}, {"b", 1}, {"d", 3}, {"e", 5}}
	if !slices.Equal(got, want) {
		t.Fatalf("MergeLoads = %v; want %v", got, want)
	}
	if !slices.Equal(cur, keep) {
		t.Fatalf("MergeLoads changed its input to %v", cur)
	}
	s := &Snapshot{Loads: cur}
	c := ReportChange("s1", []Load{{"c", 0.5}})
	c.Version = Version{Seq: 1}
	if err := s.Apply(c); err != nil {
		t.Fatal(err)
	}
	if l, ok := s.LoadOf("c"); !ok || l != 0.5 {
		t.Fatalf("LoadOf(c) after Apply = %v, %v; want 0.5", l, ok)
	}
	if !slices.Equal(cur, keep) {
		t.Fatalf("Apply changed the loads of the snapshot it came from: %v", cur)
	}
}

// TestParseLoad: FormatLoad's text reads back as the same value; anything
// else is ErrCorrupt.
func TestParseLoad(t *testing.T) {
	for _, v := range []float64{0, 1e-300, 0.1, 1.0 / 3, 12345.678901234567, MaxLoad} {
		if got, err := ParseLoad(FormatLoad(v)); err != nil || got != v {
			t.Fatalf("ParseLoad(FormatLoad(%v)) = %v, %v", v, got, err)
		}
	}
	for _, s := range []string{"", "x", "-1", "NaN", "+Inf", "1e16"} {
		if _, err := ParseLoad(s); err == nil {
			t.Fatalf("ParseLoad(%q) = nil error; want ErrCorrupt", s)
		}
	}
}

// ParseLoadEntries reads back what LoadEntry wrote, sorted, and refuses an
// entry that is not one.
func TestLoadEntries(t *testing.T) {
	in := []Load{{Partition: "b", Load: 0.1}, {Partition: "a c", Load: 1e15}}
	got, err := ParseLoadEntries(slices.Values([]string{LoadEntry(in[0]), "", LoadEntry(in[1])}))
	if err != nil || !slices.Equal(got, []Load{in[1], in[0]}) {
		t.Fatalf("ParseLoadEntries(LoadEntry...) = %v, %v; want %v sorted", got, err, in)
	}
	for _, bad := range []string{"a", "a\tx", "a\t-1", "\t1"} {
		if _, err := ParseLoadEntries(slices.Values([]string{bad})); err == nil {
			t.Errorf("ParseLoadEntries(%q) accepted it", bad)
		}
	}
}
