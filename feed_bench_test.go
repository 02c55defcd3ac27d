package herd

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/herdhq/herd/balance"
	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/redisstore"
)

// BenchmarkFollowPlacementRedis measures the whole path of a member
// following a placement on Redis, without its plans: 100 sessions on
// 100,000 partitions, each given its share by balance.Assign (spread over
// the set, as a fleet's is), the member's (the first) holding its 1,000 in
// the copy it read, the 99 others' 99,000 claims (1,000 per ClaimBatch) read
// from the log with Changes (the XREADs and their decoding), 10,000 per
// call, and queued by the feed, which applies them to the copy and checks
// them against the target of a plan (each partition's session, the
// placement itself). With reuse, each call decodes into the entries of
// the last once nothing holds them (changesInto), as the feed does; without,
// into a new list. cpu-ns/change is this process's CPU (the garbage
// collector's included), B/change and allocs/change what it allocated.
//
//	go test -run '^$' -bench FollowPlacementRedis -benchtime 10x -count 5 .
func BenchmarkFollowPlacementRedis(b *testing.B) {
	const members, parts = 100, 100_000
	raw := redistest.Need(b)
	prefix := redistest.Prefix(b, raw, "herdbench-feed")
	ctx := context.Background()
	st, err := redisstore.Open(ctx, redistest.URL(), redisstore.WithPrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	const g = "follow"
	ps := make([]store.Partition, parts)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprintf("partition-%06d", i)}
	}
	if _, err := st.SetPartitions(ctx, g, store.PartitionSet{Partitions: ps}); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, members)
	for i := range ids {
		if ids[i], err = st.OpenSession(ctx, g, fmt.Sprintf("host-%03d-12345", i), 1, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	// The placement a plan of the group without records makes: each
	// session's share spread over the set, as a fleet's is.
	in := balance.Input{}
	for _, id := range ids {
		in.Members = append(in.Members, balance.Member{ID: id, Weight: 1})
	}
	for _, p := range ps {
		in.Partitions = append(in.Partitions, balance.Partition{ID: p.ID})
	}
	owner := balance.Assign(in)
	shares := map[string][]string{}
	for _, p := range ps {
		shares[owner[p.ID]] = append(shares[owner[p.ID]], p.ID)
	}
	claim := func(id string) {
		for batch := range slices.Chunk(shares[id], store.MaxBatch) {
			if _, err := st.ClaimBatch(ctx, g, id, batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	claim(ids[0])
	before, err := st.Snapshot(ctx, g)
	if err != nil {
		b.Fatal(err)
	}
	for _, id := range ids[1:] {
		claim(id)
	}
	others := parts - len(shares[ids[0]])
	for _, reuse := range []bool{false, true} {
		b.Run(fmt.Sprintf("reuse=%v", reuse), func(b *testing.B) {
			var m benchMeter
			for b.Loop() {
				b.StopTimer()
				r := &replica{work: sortedCopy(before)}
				f := &feed{r: r}
				sessions, target, recPart := r.work.Sessions, make([]int32, parts), make([]int32, parts)
				at := map[string]int32{} // session -> index in sessions
				for i, s := range sessions {
					at[s.ID] = int32(i)
				}
				for i, p := range r.work.Partitions {
					target[i], recPart[i] = at[owner[p.ID]], int32(i)
				}
				r.target = newPlanTarget(nil, ids[0], sessions, r.work.Partitions, target, recPart, time.Minute)
				m.resume(b)
				b.StartTimer()
				for n := 0; n < others; {
					// As feed.call and feed.follow do.
					var cs []store.Change
					var err error
					if reuse {
						cs, _, err = st.ChangesInto(ctx, g, r.version(), changesPerRead, f.spare)
					} else {
						cs, _, err = st.Changes(ctx, g, r.version(), changesPerRead)
					}
					if err != nil || len(cs) == 0 {
						b.Fatalf("%d changes after %d: %v", len(cs), n, err)
					}
					n += len(cs)
					r.mu.Lock()
					f.queue(cs, kindsOf(cs))
					r.mu.Unlock()
					if reuse {
						f.spare = f.spareOf(cs)
					}
				}
				b.StopTimer()
				m.pause(b)
				if r.npending != 0 || r.offTarget || len(r.toClaim) != 0 {
					b.Fatalf("%d entries pending, off target %v, %d to claim", r.npending, r.offTarget, len(r.toClaim))
				}
				b.StartTimer()
			}
			m.report(b, float64(others), "change")
		})
	}
}

// benchMeter adds up this process's CPU time and allocations over the
// parts of a benchmark's loop between resume and pause.
type benchMeter struct {
	cpu           time.Duration
	bytes, allocs uint64
	cpu0          time.Duration
	ms0           runtime.MemStats
}

func (m *benchMeter) resume(b *testing.B) {
	runtime.ReadMemStats(&m.ms0)
	m.cpu0 = processCPU(b)
}

func (m *benchMeter) pause(b *testing.B) {
	m.cpu += processCPU(b) - m.cpu0
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.bytes += ms.TotalAlloc - m.ms0.TotalAlloc
	m.allocs += ms.Mallocs - m.ms0.Mallocs
}

// report reports the CPU, bytes and allocations per unit (units per op).
func (m *benchMeter) report(b *testing.B, units float64, unit string) {
	n := units * float64(b.N)
	b.ReportMetric(float64(m.cpu.Nanoseconds())/n, "cpu-ns/"+unit)
	b.ReportMetric(float64(m.bytes)/n, "B/"+unit)
	b.ReportMetric(float64(m.allocs)/n, "allocs/"+unit)
}
