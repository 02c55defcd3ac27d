package herd

import (
	"fmt"
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

// BenchmarkAvoidGivers: the cost avoidGivers adds to every plan of 100,000
// partitions on 16 members, without marks and with 100 marks of live
// sessions (each partition's target the giver, so that each one moves).
//
//	go test -run '^$' -bench AvoidGivers .
//
// On a shared 2-core Xeon: 0.43-0.47 ms without marks (reading the mark of
// 100,000 records, 9.6 MB, is most of it), 0.64-0.68 ms with 100.
func BenchmarkAvoidGivers(b *testing.B) {
	const P, N = 100_000, 16
	members := make([]balance.Member, N)
	sessIdx := map[string]int32{}
	for i := range members {
		members[i] = balance.Member{ID: fmt.Sprintf("S%02d", i)}
		sessIdx[members[i].ID] = int32(i)
	}
	parts := make([]balance.Partition, P)
	owners := make([]store.Ownership, P)
	rec, owner, target := make([]int32, P), make([]int32, P), make([]int32, P)
	for i := range parts {
		parts[i] = balance.Partition{ID: fmt.Sprintf("p%06d", i)}
		owners[i] = store.Ownership{Partition: parts[i].ID, Epoch: 1}
		rec[i], owner[i], target[i] = int32(i), -1, int32(i%N)
	}
	for _, marks := range []int{0, 100} {
		b.Run(fmt.Sprintf("marks=%d", marks), func(b *testing.B) {
			for i := range marks {
				p := i * (P / max(marks, 1))
				owners[p].GivenBack = members[target[p]].ID
			}
			var buf []int32
			work := make([]int32, P)
			for b.Loop() {
				copy(work, target)
				buf, _ = avoidGivers(members, parts, owners, rec, owner, work, sessIdx, buf)
			}
		})
	}
}
