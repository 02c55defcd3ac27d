package balance_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/herdhq/herd/balance"
)

func members(n int) []balance.Member {
	var ms []balance.Member
	for i := range n {
		ms = append(ms, balance.Member{ID: fmt.Sprintf("m%d", i)})
	}
	return ms
}

func partitions(n int) []balance.Partition {
	var ps []balance.Partition
	for i := range n {
		ps = append(ps, balance.Partition{ID: fmt.Sprintf("p%02d", i)})
	}
	return ps
}

func counts(target map[string]string) map[string]int {
	c := map[string]int{}
	for _, m := range target {
		c[m]++
	}
	return c
}

func printCounts(c map[string]int) {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s=%d", m, c[m]))
	}
	fmt.Println(strings.Join(parts, " "))
}

// Scaling out from one member to four: each newcomer needs 8 of the 32
// partitions, so 24 partitions move off the original member.
func ExampleAssign_scaleOut() {
	in := balance.Input{Members: members(1), Partitions: partitions(32)}
	in.Owners = balance.Assign(in) // m0 owns everything

	in.Members = members(4)
	target := balance.Assign(in)
	printCounts(counts(target))
	fmt.Println("moves:", balance.Moves(in, target), "min:", balance.MinMoves(in))
	// Output:
	// m0=8 m1=8 m2=8 m3=8
	// moves: 24 min: 24
}

// Scaling in from four members to three: the 8 partitions of the member that
// left get new owners and nothing else changes hands. Moves reports 0 because
// a departed member is not a live owner; its partitions count as unowned.
func ExampleAssign_memberLeaves() {
	in := balance.Input{Members: members(4), Partitions: partitions(32)}
	before := balance.Assign(in)
	in.Owners = before

	in.Members = members(3) // m3 leaves
	after := balance.Assign(in)
	changed := 0
	for p := range after {
		if after[p] != before[p] {
			changed++
		}
	}
	printCounts(counts(after))
	fmt.Println("changed owner:", changed, "moves between live members:", balance.Moves(in, after))
	// Output:
	// m0=10 m1=11 m2=11
	// changed owner: 8 moves between live members: 0
}
