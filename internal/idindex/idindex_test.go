package idindex

import (
	"fmt"
	"testing"
)

// find is the lookup the users of an index make.
func find(index Index, ids []string, id string) int {
	h := Hash(id)
	for v, s := index.Next(h, index.Home(h)); v >= 0; v, s = index.Next(h, index.After(s)) {
		if ids[v] == id {
			return v
		}
	}
	return -1
}

func TestBuild(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 1000} {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprint("p", i)
		}
		index := Build(n, func(i int) string { return ids[i] })
		if index.Len() < 2*n || index.Len()&(index.Len()-1) != 0 {
			t.Fatalf("n=%d: %d slots; want a power of two of at least %d", n, index.Len(), 2*n)
		}
		for i, id := range ids {
			if got := find(index, ids, id); got != i {
				t.Fatalf("n=%d: %s found at %d; want %d", n, id, got, i)
			}
		}
		if got := find(index, ids, "absent"); got != -1 {
			t.Fatalf("n=%d: an absent id found at %d", n, got)
		}
		if Hash("p1") != HashBytes([]byte("p1")) {
			t.Fatal("Hash and HashBytes differ")
		}
	}
}

// TestTagsSkipOthers: a lookup compares its id with another list entry's
// only when their tags collide (one slot in 2^14 on 100,000 ids), not at
// every occupied slot it passes, and the zero Index finds nothing.
func TestTagsSkipOthers(t *testing.T) {
	for _, n := range []int{1023, 1024, 100_000} {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("partition-%06d", i)
		}
		index := Build(n, func(i int) string { return ids[i] })
		compared, passed := 0, 0
		for i, id := range ids {
			h := Hash(id)
			got := -1
			for v, s := index.Next(h, index.Home(h)); v >= 0; v, s = index.Next(h, index.After(s)) {
				compared++
				if ids[v] == id {
					got = v
					break
				}
			}
			if got != i {
				t.Fatalf("n=%d: %s found at %d; want %d", n, id, got, i)
			}
			for s := index.Home(h); index.slots[s] != 0; s = index.After(s) {
				passed++
				if index.slots[s]&index.low == int32(i+1) {
					break
				}
			}
		}
		if extra := compared - n; extra > n/100 || passed-n < n/10 {
			t.Errorf("n=%d: %d ids compared beyond the %d found, over %d slots passed: want the slots of other ids (%d) mostly skipped by tag", n, extra, n, passed, passed-n)
		}
	}
	var zero Index
	if v, _ := zero.Next(Hash("p"), 0); v != -1 || zero.Len() != 0 {
		t.Errorf("the zero Index found %d in %d slots", v, zero.Len())
	}
}
