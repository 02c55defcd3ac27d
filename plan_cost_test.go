package herd

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/herdhq/herd/balance"
	"github.com/herdhq/herd/store"
)

// BenchmarkFullPlan measures one full plan of a member of 100 on 100,000
// partitions, past the copy's checks: the join of the copy with the
// partition set, the target (plan_full.go's assign) and the member's steps
// (planRunning, planClaims, planReleases), in the states a fleet meets:
//
//   - first: nothing owned, a membership the process has not planned
//     before (each member's first plan, or members arriving one by one);
//   - placing: half the partitions claimed where the first target put
//     them, the same membership (a first placement under way);
//   - joined10: 10 members joined a balanced fleet of 100;
//   - crashed10: 10 of a balanced fleet of 100 crashed (records of
//     sessions gone);
//   - balanced: every partition on its target owner.
//
// first, joined10 and crashed10 turn through more memberships than the
// member keeps ideals of (its Assigner's cache), so that each plan computes
// one, as each member does once per membership. The member plans as one
// of the 100 that runs its 1,000 partitions (as a joiner in joined10, with
// none, so that no handoff changes its slots between plans).
//
//	go test -run '^$' -bench FullPlan -count 6 .
func BenchmarkFullPlan(b *testing.B) {
	const nm, np, spare = 100, 100_000, 30
	ps := make([]store.Partition, np)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprintf("partition-%06d", i)}
	}
	// Sessions of 100 members, then spare joiners, all sorted by id.
	ids := make([]string, nm+spare)
	for i := range ids {
		ids[i] = fmt.Sprintf("host-%03d-%08x", i, uint32(i)*2654435761)
	}
	base := sessionsOf(ids[:nm])
	ideal := balanceOf(base, ps, nil)
	balanced := make([]store.Ownership, np)
	half := make([]store.Ownership, 0, np/2)
	for i, p := range ps {
		balanced[i] = store.Ownership{Partition: p.ID, Session: ids[ideal[i]], Epoch: 1}
		if i%2 == 0 {
			half = append(half, balanced[i])
		}
	}
	rotate := func(k int, pick func(r int) []string) []*store.Snapshot {
		var snaps []*store.Snapshot
		for r := range k {
			snaps = append(snaps, &store.Snapshot{Sessions: sessionsOf(pick(r))})
		}
		return snaps
	}
	const memberships = 20 // more than balance keeps ideals of
	cases := []struct {
		name  string
		snaps []*store.Snapshot
		recs  []store.Ownership
		me    string
		runs  bool // me runs its records
	}{
		{"first", rotate(memberships, func(r int) []string { return window(ids, r, nm) }), nil, ids[memberships], false},
		{"placing", []*store.Snapshot{{Sessions: base}}, half, ids[0], true},
		{"joined10", rotate(memberships, func(r int) []string {
			return append(ids[:nm+1:nm+1], window(ids[nm+1:], r, 9)...) // ids[nm] and 9 others
		}), balanced, ids[nm], false},
		{"crashed10", rotate(memberships, func(r int) []string {
			return append(ids[:r+1:r+1], ids[r+11:nm]...) // 1..10 after r crashed
		}), balanced, ids[0], true},
		{"balanced", []*store.Snapshot{{Sessions: base}}, balanced, ids[0], true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			owners, _ := withPlaceholders(ps, c.recs, liveSessions(sessionsOf(ids)))
			for _, s := range c.snaps {
				s.Partitions, s.Owners, s.PartitionSetStored = ps, owners, true
			}
			m := &Member{log: slog.New(slog.DiscardHandler)}
			m.rel = &releaser{m: m, wake: make(chan struct{}, 1), released: map[string]uint64{}}
			sess := &session{id: c.me}
			slots := map[string]*slot{}
			for i, r := range owners {
				if c.runs && r.Session == c.me {
					sl := &slot{sess: sess, at: int32(i)}
					sl.c.Partition, sl.c.Epoch = r.Partition, r.Epoch
					slots[r.Partition] = sl
				}
			}
			b.ReportAllocs()
			i := 0
			cpu0 := processCPU(b)
			for b.Loop() {
				fp := &fullPlan{sess: sess, slots: slots, b: &m.planner.buf}
				if err := m.assign(fp, c.snaps[i%len(c.snaps)]); err != nil {
					b.Fatal(err)
				}
				i++
				var pl reconcilePlan
				m.planRunning(fp)
				m.planClaims(fp, &pl)
				m.planReleases(fp)
			}
			// CPU time is steadier than wall time on a loaded machine.
			b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// sessionsOf returns sessions of weight 1 with ids.
func sessionsOf(ids []string) []store.SessionInfo {
	ss := make([]store.SessionInfo, len(ids))
	for i, id := range ids {
		ss[i] = store.SessionInfo{ID: id, Member: id, Weight: 1}
	}
	return ss
}

// window returns n of xs from r on, wrapping around, in xs's order.
func window(xs []string, r, n int) []string {
	var out []string
	for i := range xs {
		if d := (i - r%len(xs) + len(xs)) % len(xs); d < n {
			out = append(out, xs[i])
		}
	}
	return out
}

// balanceOf returns the target of ps on sessions, given owner.
func balanceOf(sessions []store.SessionInfo, ps []store.Partition, owner []int32) []int32 {
	ms := make([]balance.Member, len(sessions))
	for i, s := range sessions {
		ms[i] = balance.Member{ID: s.ID, Weight: s.Weight}
	}
	bps := make([]balance.Partition, len(ps))
	for i, p := range ps {
		bps[i] = balance.Partition{ID: p.ID}
	}
	if owner == nil {
		owner = make([]int32, len(ps))
		for i := range owner {
			owner[i] = -1
		}
	}
	var a balance.Assigner
	t, err := a.AssignSorted(ms, bps, owner, nil)
	if err != nil {
		panic(err)
	}
	return t
}
