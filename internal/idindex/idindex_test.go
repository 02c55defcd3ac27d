package idindex

import (
	"fmt"
	"testing"
)

// find is the lookup the users of an index make.
func find(index []int32, ids []string, id string) int {
	mask := uint64(len(index) - 1)
	for h := Hash(id) & mask; ; h = (h + 1) & mask {
		v := int(index[h]) - 1
		if v < 0 {
			return -1
		}
		if ids[v] == id {
			return v
		}
	}
}

func TestBuild(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 1000} {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprint("p", i)
		}
		index := Build(n, func(i int) string { return ids[i] })
		if len(index) < 2*n || len(index)&(len(index)-1) != 0 {
			t.Fatalf("n=%d: %d slots; want a power of two of at least %d", n, len(index), 2*n)
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
