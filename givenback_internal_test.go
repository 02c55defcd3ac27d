package herd

import (
	"slices"
	"testing"

	"github.com/herdhq/herd/balance"
	"github.com/herdhq/herd/store"
)

// avoidGivers reads the marks of the records: a mark naming a live session
// keeps the partition off it, a mark naming a session that has ended is
// moot, and with one member nothing moves.
func TestAvoidGivers(t *testing.T) {
	members := []balance.Member{{ID: "A"}, {ID: "B"}}
	sessIdx := map[string]int32{"A": 0, "B": 1}
	parts := []balance.Partition{{ID: "p"}, {ID: "q"}, {ID: "r"}, {ID: "s"}}
	owners := []store.Ownership{
		{Partition: "p", Epoch: 3, GivenBack: "A"},    // free, given back by live A
		{Partition: "q", Epoch: 3, GivenBack: "GONE"}, // the giver has ended
		{Partition: "r", Epoch: 3, Session: "B", GivenBack: "A"},
	}
	rec := []int32{0, 1, 2, -1} // s has no record
	owner := []int32{-1, -1, 1, -1}

	target := []int32{0, 0, 0, 0}
	buf, moved := avoidGivers(members, parts, owners, rec, owner, target, sessIdx, nil)
	if want := []int32{1, 0, 1, 0}; !slices.Equal(target, want) || moved != 2 {
		t.Fatalf("target %v, moved %d; want %v, 2 (p to B, q stays, r stays with its owner B)", target, moved, want)
	}
	if want := []int32{0, -1, 0, -1}; !slices.Equal(buf, want) {
		t.Fatalf("avoid list %v; want %v", buf, want)
	}

	// No marks: nothing is built, nothing moves.
	plain := []store.Ownership{{Partition: "p", Epoch: 1}, {Partition: "q", Epoch: 1}, {Partition: "r", Epoch: 1, Session: "B"}}
	target = []int32{0, 0, 1, 1}
	buf, moved = avoidGivers(members, parts, plain, rec, owner, target, sessIdx, buf)
	if moved != 0 || len(buf) != 0 || !slices.Equal(target, []int32{0, 0, 1, 1}) {
		t.Fatalf("without marks: target %v, moved %d, avoid %v; want nothing changed", target, moved, buf)
	}

	// One member: the partition runs where it was given back.
	target = []int32{0, 0, 0, 0}
	_, moved = avoidGivers(members[:1], parts, owners, rec, []int32{-1, -1, -1, -1}, target, map[string]int32{"A": 0}, nil)
	if moved != 0 || !slices.Equal(target, []int32{0, 0, 0, 0}) {
		t.Fatalf("one member: target %v, moved %d; want nothing moved", target, moved)
	}
}
