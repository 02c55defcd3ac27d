package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/store"
)

// The reads each member process of a fleet makes when 100 members place
// 100,000 partitions: the log of the placement (100,000 claims, 1,000 per
// ClaimBatch, by 100 sessions) and the group with a record for each
// partition. Each benchmark reports the client's CPU (this process's user
// and system time: the server is another process), the bytes and the
// allocations per change or record:
//
//	go test -run '^$' -bench 'Fleet' -benchtime 5x ./store/redisstore/

// fleetGroup fills group g of s as a placement of 100 sessions on 100,000
// partitions leaves it, and returns the version before the claims.
func fleetGroup(b *testing.B, s *Store, g string) store.Version {
	return fleetGroupOf(b, s, g, 100)
}

// fleetGroupOf is fleetGroup with members sessions, each claiming its
// share in batches of MaxBatch (16 members: 6,250 each, in six batches of
// 1,000 and one of 250, so that entries of fewer than maxGroup changes are
// among the full ones, as in a placement's log).
func fleetGroupOf(b *testing.B, s *Store, g string, members int) store.Version {
	b.Helper()
	ctx := context.Background()
	const n = 100_000
	ps := make([]store.Partition, n)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprintf("partition-%06d", i)}
	}
	if _, err := s.SetPartitions(ctx, g, store.PartitionSet{Partitions: ps}); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, members)
	for i := range ids {
		id, err := s.OpenSession(ctx, g, fmt.Sprintf("host-%03d-12345", i), 1, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = id
	}
	snap, err := s.Snapshot(ctx, g)
	if err != nil {
		b.Fatal(err)
	}
	for i, id := range ids {
		share := make([]string, n/members)
		for j := range share {
			share[j] = ps[i*len(share)+j].ID
		}
		for batch := range slices.Chunk(share, store.MaxBatch) {
			if _, err := s.ClaimBatch(ctx, g, id, batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	return snap.Version
}

// costMeter measures this process's CPU time and allocations over a
// benchmark's loop.
type costMeter struct {
	cpu    time.Duration
	ms     runtime.MemStats
	before time.Duration
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (m *costMeter) start(b *testing.B) {
	runtime.GC()
	runtime.ReadMemStats(&m.ms)
	m.before = cpuTime(b)
}

// report reports the CPU, bytes and allocations per unit (units per op).
func (m *costMeter) report(b *testing.B, units float64, unit string) {
	cpu := cpuTime(b) - m.before
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	n := units * float64(b.N)
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/"+unit)
	b.ReportMetric(float64(after.TotalAlloc-m.ms.TotalAlloc)/n, "B/"+unit)
	b.ReportMetric(float64(after.Mallocs-m.ms.Mallocs)/n, "allocs/"+unit)
}

// BenchmarkFleetReadLog reads the log of the placement with Changes, 10,000
// changes per call, as a member's feed does.
func BenchmarkFleetReadLog(b *testing.B) {
	for _, members := range []int{100, 16} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) { readFleetLog(b, members) })
	}
}

// readFleetLog is BenchmarkFleetReadLog on the log of members sessions.
func readFleetLog(b *testing.B, members int) {
	s, _ := newTestStore(b)
	ctx := context.Background()
	const g = "fleet"
	from := fleetGroupOf(b, s, g, members)
	var m costMeter
	m.start(b)
	for b.Loop() {
		v, n := from, 0
		for n < 100_000 {
			cs, next, err := s.Changes(ctx, g, v, 10*store.MaxBatch)
			if err != nil {
				b.Fatal(err)
			}
			n += len(cs)
			v = next
		}
	}
	m.report(b, 100_000, "change")
}

// BenchmarkFleetSnapshot reads the group after the placement.
func BenchmarkFleetSnapshot(b *testing.B) {
	s, _ := newTestStore(b)
	ctx := context.Background()
	const g = "fleet"
	fleetGroup(b, s, g)
	var m costMeter
	m.start(b)
	for b.Loop() {
		snap, err := s.Snapshot(ctx, g)
		if err != nil {
			b.Fatal(err)
		}
		if len(snap.Owners) != 100_000 {
			b.Fatalf("%d records; want 100,000", len(snap.Owners))
		}
	}
	m.report(b, 100_000, "record")
}

// placementEntries is the log of the placement as XREAD returns it: 1,000
// entries of 100 claims each, chained from the entry after.
func placementEntries(after store.Version) []redis.XMessage {
	var msgs []redis.XMessage
	tag, seq := after.Tag, after.Seq
	var buf []byte
	for e := range 1000 {
		sess := fmt.Sprintf("S%025d", e/10)
		var v strings.Builder
		v.WriteString(groupPrefix[:1])
		for i := range 100 {
			fmt.Fprintf(&v, "%sC\npartition-%06d\n%s\n%d\nhost-%03d-12345", groupSep, e*100+i, sess, 1700000000000001+seq+uint64(i), e/10)
		}
		seq += 100
		tag, buf = chain(buf, tag, v.String())
		msgs = append(msgs, redis.XMessage{ID: fmt.Sprintf("%d-%d", seq, tag), Values: map[string]any{"e": v.String()}})
	}
	return msgs
}

// BenchmarkFleetDecodeLog decodes the log of the placement (decodeEntries,
// 10,000 changes per call): the client's work in BenchmarkFleetReadLog
// but go-redis' reading of the reply.
//
//	go test -run '^$' -bench FleetDecodeLog -benchtime 20x ./store/redisstore/
func BenchmarkFleetDecodeLog(b *testing.B) {
	from := store.Version{Seq: 200, Tag: 12345}
	msgs := placementEntries(from)
	var m costMeter
	m.start(b)
	for b.Loop() {
		v := from
		for i := 0; i < len(msgs); i += 100 {
			out, next, err := decodeEntries(nil, v, msgs[i:i+100], 10*store.MaxBatch)
			if err != nil || len(out) != 10*store.MaxBatch {
				b.Fatalf("%d changes, %v", len(out), err)
			}
			v = next
		}
	}
	m.report(b, 100_000, "change")
}

// BenchmarkFleetDecodePartList decodes the partition set of the placement
// as a Snapshot reads it (partlist).
//
//	go test -run '^$' -bench FleetDecodePartList -benchtime 20x ./store/redisstore/
func BenchmarkFleetDecodePartList(b *testing.B) {
	ps := make([]store.Partition, 100_000)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprintf("partition-%06d", i)}
	}
	list := encodePartList(ps)
	var m costMeter
	m.start(b)
	for b.Loop() {
		if got, ok := decodePartList(list); !ok || len(got) != len(ps) {
			b.Fatalf("%d partitions, %v", len(got), ok)
		}
	}
	m.report(b, 100_000, "partition")
}
