package balance

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func members(ids ...string) []Member {
	ms := make([]Member, len(ids))
	for i, id := range ids {
		ms[i] = Member{ID: id}
	}
	return ms
}

func partitions(n int) []Partition {
	ps := make([]Partition, n)
	for i := range ps {
		ps[i] = Partition{ID: fmt.Sprintf("p%02d", i)}
	}
	return ps
}

func TestAvoidRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ms     []Member
		owner  []int32
		avoid  []int32
		target []int32
		want   []int32
		moved  int
	}{
		{name: "nothing to avoid", ms: members("a", "b"),
			owner: []int32{0, 1}, avoid: nil, target: []int32{0, 1}, want: []int32{0, 1}},
		{name: "target is not the avoided member", ms: members("a", "b"),
			owner: []int32{-1, 1}, avoid: []int32{1, -1}, target: []int32{0, 1}, want: []int32{0, 1}},
		{name: "one member: runs where it was given back", ms: members("a"),
			owner: []int32{-1}, avoid: []int32{0}, target: []int32{0}, want: []int32{0}},
		{name: "free: to the other member", ms: members("a", "b"),
			owner: []int32{-1, 1}, avoid: []int32{0, -1}, target: []int32{0, 1}, want: []int32{1, 1}, moved: 1},
		{name: "owned elsewhere: stays with its owner", ms: members("a", "b", "c"),
			owner: []int32{2, 1, 1}, avoid: []int32{0, -1, -1}, target: []int32{0, 1, 2}, want: []int32{2, 1, 2}, moved: 1},
		{name: "owned by the avoided member (a stale read): to the least loaded other", ms: members("a", "b", "c"),
			owner: []int32{0, 1, 1}, avoid: []int32{0, -1, -1}, target: []int32{0, 1, 1}, want: []int32{2, 1, 1}, moved: 1},
		{name: "out-of-range marks are none", ms: members("a", "b"),
			owner: []int32{-1, -1}, avoid: []int32{7, -3}, target: []int32{0, 1}, want: []int32{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Clone(tc.target)
			moved := Avoid(tc.ms, partitions(len(got)), tc.owner, tc.avoid, got)
			if !slices.Equal(got, tc.want) || moved != tc.moved {
				t.Fatalf("Avoid = %v, moved %d; want %v, moved %d", got, moved, tc.want, tc.moved)
			}
		})
	}
}

// Many partitions given back by one member are spread over the others by
// load, one at a time.
func TestAvoidSpreadsByLoad(t *testing.T) {
	ms := members("a", "b", "c")
	const n = 12
	owner, avoid, target := make([]int32, n), make([]int32, n), make([]int32, n)
	for i := range n {
		owner[i], avoid[i], target[i] = -1, -1, int32(i%3)
		if i%3 == 0 {
			avoid[i] = 0 // all of a's four
		}
	}
	if moved := Avoid(ms, partitions(n), owner, avoid, target); moved != 4 {
		t.Fatalf("moved %d; want 4", moved)
	}
	load := make([]int, 3)
	for _, m := range target {
		load[m]++
	}
	if load[0] != 0 || load[1] != 6 || load[2] != 6 {
		t.Fatalf("loads %v after moving a's four partitions; want [0 6 6]", load)
	}
}

// Load is per unit of weight: a member of weight 2 with two partitions is
// less loaded than one of weight 1 with two.
func TestAvoidWeighted(t *testing.T) {
	ms := []Member{{ID: "a"}, {ID: "b", Weight: 2}, {ID: "c"}}
	owner := []int32{-1, 1, 1, 2, 2}
	avoid := []int32{0, -1, -1, -1, -1}
	target := []int32{0, 1, 1, 2, 2}
	Avoid(ms, partitions(5), owner, avoid, target)
	if target[0] != 1 {
		t.Fatalf("target %v; want p00 on b (2 partitions for weight 2), not c (2 for weight 1)", target)
	}
}

// Ties of load are broken by the partition's rendezvous score, so that
// equal members share the moved partitions, and the answer is the same
// whatever else is being moved.
func TestAvoidTieByScore(t *testing.T) {
	ms := members("a", "b", "c", "d")
	seen := map[int32]bool{}
	for i := range 40 {
		ps := []Partition{{ID: fmt.Sprintf("q%d", i)}, {ID: "r"}, {ID: "s"}, {ID: "t"}}
		target := []int32{0, 1, 2, 3}
		Avoid(ms, ps, []int32{-1, 1, 2, 3}, []int32{0, -1, -1, -1}, target)
		key := newMember(ms[target[0]]).key
		for m := 1; m < 4; m++ {
			if m != int(target[0]) && score(hashString(ps[0].ID), newMember(ms[m]).key) > score(hashString(ps[0].ID), key) {
				t.Fatalf("%s went to %s; %s has the higher score at the same load", ps[0].ID, ms[target[0]].ID, ms[m].ID)
			}
		}
		seen[target[0]] = true
	}
	if len(seen) != 3 {
		t.Fatalf("40 partitions went to members %v; want each of b, c, d chosen by score", seen)
	}
}

// TestAvoidSettles plays random fleets forward: every step plans with
// AssignSorted then Avoid from the owners the last step left, and then
// carries out the plan, all at once (sync) or a random part of it with the
// partitions that move first released (async, as members hand off one by
// one). No plan ever places a partition on the member it avoids (there being
// two members or more); the plan reaches a fixed point (sync: within three
// steps; async: within 50), so it does not flap between plans; and there the
// members hold no more partitions over their quotas, in total, than there
// are marks.
func TestAvoidSettles(t *testing.T) {
	worst := map[bool]int{}
	for seed := range uint64(3000) {
		rng := rand.New(rand.NewPCG(seed, 3))
		nm, np := 2+rng.IntN(7), rng.IntN(300)
		ms := make([]Member, nm)
		for i := range ms {
			ms[i] = Member{ID: fmt.Sprintf("m%02d", i), Weight: 1}
			if seed%2 == 0 {
				ms[i].Weight = 1 + rng.IntN(4)
			}
		}
		ps := make([]Partition, np)
		owner, avoid := make([]int32, np), make([]int32, np)
		marks := 0
		for i := range ps {
			ps[i] = Partition{ID: fmt.Sprintf("p%04d", i)}
			owner[i], avoid[i] = int32(rng.IntN(nm+1))-1, -1
			if rng.IntN(8) == 0 {
				avoid[i] = int32(rng.IntN(nm))
				marks++
			}
		}
		async := seed%3 == 0
		var a Assigner
		steps, limit := 0, 3
		if async {
			limit = 50
		}
		for ; ; steps++ {
			target, err := a.AssignSorted(ms, ps, owner, nil)
			if err != nil {
				t.Fatal(err)
			}
			Avoid(ms, ps, owner, avoid, target)
			for i, m := range target {
				if m == avoid[i] {
					t.Fatalf("seed %d step %d: %s placed on %s, which it must avoid", seed, steps, ps[i].ID, ms[m].ID)
				}
			}
			if slices.Equal(target, owner) {
				break
			}
			if steps == limit {
				t.Fatalf("seed %d (async %v): the plan still moves partitions after %d steps", seed, async, limit)
			}
			for i, m := range target {
				switch {
				case m == owner[i]:
				case async && rng.IntN(2) == 0:
					owner[i] = -1 // released, not claimed yet
				default:
					owner[i] = m
				}
			}
		}
		worst[async] = max(worst[async], steps)
		in := Input{Members: ms, Partitions: ps, Owners: map[string]string{}}
		held := map[string]int{}
		for i, o := range owner {
			in.Owners[ps[i].ID] = ms[o].ID
			held[ms[o].ID]++
		}
		over := 0
		for m, q := range Quotas(in) {
			over += max(0, held[m]-q)
		}
		if over > marks {
			t.Fatalf("seed %d: at the fixed point members hold %d partitions over their quotas, with %d marks", seed, over, marks)
		}
	}
	t.Logf("steps to the fixed point, at most: sync %d, async %d", worst[false], worst[true])
}
