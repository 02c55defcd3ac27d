package balance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// capacityFleet is the load study's capacity case in small: nm members of
// capacities 1, 2 and 4 (cycled), np partitions of Zipf(1.1) loads
// shuffled by seed, held as the count balance puts them.
func capacityFleet(t *testing.T, nm, np int, seed uint64) ([]Member, []Partition, []int32, []float64) {
	t.Helper()
	members := make([]Member, nm)
	for m := range members {
		members[m] = Member{ID: fmt.Sprintf("m%03d", m), Weight: []int{1, 2, 4}[m%3]}
	}
	parts := make([]Partition, np)
	none := make([]int32, np)
	load := make([]float64, np)
	for i := range parts {
		parts[i] = Partition{ID: fmt.Sprintf("p%05d", i), Weight: 1}
		none[i] = -1
		load[i] = math.Pow(float64(i+1), -1.1)
	}
	rng := rand.New(rand.NewPCG(seed, 31))
	rng.Shuffle(np, func(i, j int) { load[i], load[j] = load[j], load[i] })
	var a Assigner
	owner, err := a.AssignSorted(members, parts, none, nil)
	if err != nil {
		t.Fatal(err)
	}
	return members, parts, owner, load
}

// TestAssignLoadCapacityMoves: on members of capacities 1, 2 and 4 that
// start from the count balance, Zipf loads reach the band in few moves. A
// member holding a partition too big for the room of the least loaded
// members used to give them one small partition per move, dozens of them
// (31 moves on the first fleet, 514 on the 12-member ones; 13 and 358
// now).
func TestAssignLoadCapacityMoves(t *testing.T) {
	cases := []struct {
		nm, np, seeds, max int
	}{
		{6, 128, 1, 20},
		{12, 256, 8, 400},
	}
	for _, c := range cases {
		total := 0
		for seed := uint64(1); seed <= uint64(c.seeds); seed++ {
			members, parts, owner, load := capacityFleet(t, c.nm, c.np, seed)
			cur, moves := settle(t, members, parts, owner, load, LoadOptions{})
			total += moves
			checkInBand(t, fmt.Sprintf("%d members, seed %d", c.nm, seed), members, parts, cur, load)
		}
		if total > c.max {
			t.Errorf("%d members, %d partitions, seeds 1-%d: %d moves to the band; want at most %d", c.nm, c.np, c.seeds, total, c.max)
		}
	}
}
