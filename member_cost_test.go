package herd

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/herdhq/herd/balance"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// BenchmarkMemberPlacement measures what one member of a fleet of 100 does
// when the fleet places 100,000 partitions, 1,000 per member: it joins (a
// read of the group, the 100 sessions), plans, claims its 1,000 partitions
// and starts their handlers (which do nothing), then follows the log of the
// other 99 members' claims (99,000 entries, 1,000 per batch) until its copy
// of the group has caught up and the target of its plan is seen carried
// out. The other members are sessions the benchmark opens and claims for
// directly in the store (memstore), with the member's log reads held back
// while it does, so that their work is not measured: cpu-ns/op is this
// process's CPU time (user and system) in the member's phases alone, and
// allocs/op and B/op are theirs too. The garbage collector's time is in
// cpu-ns/op, and here it also marks the store's records and log, which a
// member process does not hold: a CPU profile with -tagfocus member= shows
// the member's own goroutines. Wall time per op mostly waits
// (JoinSettle, the target's quiet time) and means little. The session TTL
// is 20 s, so that the pause while the others claim (a second or more on a
// loaded machine) is not taken for the end of the placement: the target
// lasts a ninth of the TTL after the log goes quiet (target.go).
//
//	go test -run '^$' -bench MemberPlacement -benchtime 5x -count 6 .
func BenchmarkMemberPlacement(b *testing.B) {
	const members, parts = 100, 100_000
	b.StopTimer() // the timer runs in the member's phases only
	ps := make([]store.Partition, parts)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprintf("partition-%06d", i)}
	}
	var cpu time.Duration
	fulls := 0
	b.ReportAllocs()
	for range b.N {
		join, follow, f := placeOneMember(b, &heldLog{Store: memstore.New()}, "bench", ps, members)
		cpu += join + follow
		fulls += f
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(fulls)/float64(b.N), "fullplans/op")
}

// placeOneMember is one op of BenchmarkMemberPlacement on group g of st,
// which has no such group yet (the timer stopped on entry and on return).
// It returns the CPU time of the member's two phases (joining, following
// the others' claims) and the full plans it made.
func placeOneMember(b *testing.B, st *heldLog, g string, ps []store.Partition, members int) (join, follow time.Duration, fulls int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := st.SetPartitions(ctx, g, store.PartitionSet{Partitions: ps}); err != nil {
		b.Fatal(err)
	}
	for i := 1; i < members; i++ {
		if _, err := st.OpenSession(ctx, g, fmt.Sprintf("host-%03d", i), 1, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	share := len(ps) / members
	runtime.GC()

	// The member's phase: join, plan, claim and start its share.
	cpu0 := processCPU(b)
	b.StartTimer()
	// The member's goroutines carry the label member (a CPU profile's
	// -tagfocus member= shows them alone).
	var m *Member
	var err error
	pprof.Do(ctx, pprof.Labels("member", "host-000"), func(ctx context.Context) {
		m, err = Join(ctx, st, Config{Group: g, Member: "host-000", JoinSettle: 10 * time.Millisecond, SessionTTL: 20 * time.Second,
			Logger: slog.New(slog.DiscardHandler), Handler: func(c *Claim) error {
				<-c.Context().Done()
				return nil
			}})
	})
	if err != nil {
		b.Fatal(err)
	}
	waitFor(b, func() bool { return m.ownedCount() == share && m.caughtUp(st, g) })
	b.StopTimer()
	join = processCPU(b) - cpu0

	// The others' claims, while the member's log reads are held back.
	st.hold()
	othersClaim(b, ctx, st, g, ps, m.Session())
	runtime.GC()

	// The member's phase: follow the log of the others' claims.
	cpu0 = processCPU(b)
	b.StartTimer()
	st.release()
	waitFor(b, func() bool { return m.targetSeenMet() && m.caughtUp(st, g) })
	b.StopTimer()
	follow = processCPU(b) - cpu0

	cancel()
	<-m.Done()
	return join, follow, int(m.planner.full.Load())
}

// othersClaim claims for every session of g but mine its share of ps as
// the target of a plan of the group without records gives it, 1,000 per
// batch, and checks that mine holds its share.
func othersClaim(b *testing.B, ctx context.Context, st store.Store, g string, ps []store.Partition, mine string) {
	snap, err := st.Snapshot(ctx, g)
	if err != nil {
		b.Fatal(err)
	}
	in := balance.Input{}
	for _, s := range snap.Sessions {
		in.Members = append(in.Members, balance.Member{ID: s.ID, Weight: s.Weight})
	}
	for _, p := range ps {
		in.Partitions = append(in.Partitions, balance.Partition{ID: p.ID, Weight: p.Weight})
	}
	target := balance.Assign(in)
	bySession := map[string][]string{}
	for _, p := range ps {
		bySession[target[p.ID]] = append(bySession[target[p.ID]], p.ID)
	}
	held := 0
	for _, o := range snap.Owners {
		if o.Session != mine || target[o.Partition] != mine {
			b.Fatalf("record %+v: not the member's target (%s)", o, target[o.Partition])
		}
		held++
	}
	if held != len(bySession[mine]) {
		b.Fatalf("the member holds %d partitions, its target %d", held, len(bySession[mine]))
	}
	for _, s := range snap.Sessions {
		if s.ID == mine {
			continue
		}
		for batch := range slices.Chunk(bySession[s.ID], store.MaxBatch) {
			if _, err := st.ClaimBatch(ctx, g, s.ID, batch); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// caughtUp reports whether the member's copy of g has reached the end of
// the log: the log has nothing after it (memstore's Changes answers a call
// at rest by its deadline with no entries and no error; redisstore's
// needs the time of a round trip before it: st.atRest).
func (m *Member) caughtUp(st *heldLog, g string) bool {
	at, _ := m.rep.mark()
	ctx, cancel := context.WithTimeout(context.Background(), max(st.atRest, 100*time.Microsecond))
	defer cancel()
	cs, _, err := st.Changes(ctx, g, at, 1)
	return err == nil && len(cs) == 0
}

// targetSeenMet reports whether the member has a target that every entry
// since it was set carried out, and has found the copy showing it met (see
// replica.met): the end of a placement for a member.
func (m *Member) targetSeenMet() bool {
	r := &m.rep
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.target != nil && !r.offTarget && r.targetFirst.IsZero() && r.npending == 0
}

// waitFor polls cond every 5 ms for up to a minute.
func waitFor(b *testing.B, cond func() bool) {
	b.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			b.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// processCPU is this process's CPU time (user and system).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heldLog is a store whose log reads can be held back: while held, a call
// to Changes waits (before and after asking the store) until released.
type heldLog struct {
	store.Store
	atRest time.Duration // how long caughtUp's call waits at most (0: 100 µs)
	mu     sync.Mutex
	gate   chan struct{} // closed when released; nil: not held
}

func (h *heldLog) hold() {
	h.mu.Lock()
	h.gate = make(chan struct{})
	h.mu.Unlock()
}

func (h *heldLog) release() {
	h.mu.Lock()
	close(h.gate)
	h.gate = nil
	h.mu.Unlock()
}

func (h *heldLog) wait(ctx context.Context) error {
	h.mu.Lock()
	g := h.gate
	h.mu.Unlock()
	if g == nil {
		return nil
	}
	select {
	case <-g:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *heldLog) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	return h.ChangesInto(ctx, group, after, max, nil)
}

// ChangesInto is Changes, passing dst on to the store's ChangesInto if it
// has one (see changesInto), as the stores a member is given in a fleet do.
func (h *heldLog) ChangesInto(ctx context.Context, group string, after store.Version, max int, dst []store.Change) ([]store.Change, store.Version, error) {
	if err := h.wait(ctx); err != nil {
		return nil, after, err
	}
	var cs []store.Change
	var v store.Version
	var err error
	if in, ok := h.Store.(changesInto); ok && dst != nil {
		cs, v, err = in.ChangesInto(ctx, group, after, max, dst)
	} else {
		cs, v, err = h.Store.Changes(ctx, group, after, max)
	}
	if err := h.wait(ctx); err != nil {
		return nil, after, err
	}
	return cs, v, err
}
