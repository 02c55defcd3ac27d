package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/redis/go-redis/v9"
)

// commandCounter counts the commands a client sends (one per round trip
// outside pipelines, which the store does not use).
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// claimPartitions is the first placement of 1,000 partitions on one member:
// each iteration opens a session in a new group and claims 1,000 free
// partitions, with 1,000 Claims or one ClaimBatch. It reports the commands
// sent per placement (round-trips/op).
//
//	go test -run '^$' -bench 'Claim1000' -benchtime 20x ./store/redisstore/
//
// On a shared 2-core AMD EPYC with Redis 7.0.15 on loopback: 1,000 Claims
// take 45-88 ms and 1,000 round trips, one ClaimBatch 7.9-8.5 ms and one
// round trip (mostly the script's own run time, during which Redis serves
// no one else; 5.5 ms before the entries' tags were chained with SHA-1).
func claimPartitions(b *testing.B, batch bool) {
	s, _ := newTestStore(b)
	var cc commandCounter
	s.client.AddHook(&cc)
	ctx := context.Background()
	parts := make([]string, 1000)
	for i := range parts {
		parts[i] = fmt.Sprintf("partition-%04d", i)
	}
	var trips int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		g := fmt.Sprintf("bench-%d", i)
		id, err := s.OpenSession(ctx, g, "member-1", 1, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		before := cc.n.Load()
		b.StartTimer()
		if batch {
			rs, err := s.ClaimBatch(ctx, g, id, parts)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rs {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		} else {
			for _, p := range parts {
				if _, err := store.Claim(ctx, s, g, p, id); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		trips += cc.n.Load() - before
		b.StartTimer()
	}
	b.ReportMetric(float64(trips)/float64(b.N), "round-trips/op")
}

func BenchmarkClaim1000Single(b *testing.B) { claimPartitions(b, false) }
func BenchmarkClaim1000Batch(b *testing.B)  { claimPartitions(b, true) }

// BenchmarkLogBytesPerEntry reports what the log stream costs Redis per
// change (MEMORY USAGE of the stream divided by the changes it holds) for claims of
// partitions named like "partition-0042" by a member named "host-a-12345"
// (a session id is 26 characters, an epoch 16 digits): the entries of a
// first placement.
//
//	go test -run '^$' -bench LogBytesPerEntry -benchtime 1x ./store/redisstore/
//
// Redis 7.0.15: 88 bytes per change, in entries of 100 changes (106 when
// each change was an entry of its own).
func BenchmarkLogBytesPerEntry(b *testing.B) {
	s, raw := newTestStore(b)
	ctx := context.Background()
	for b.Loop() {
		g := "bytes"
		id, err := s.OpenSession(ctx, g, "host-a-12345", 1, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		for j := range 10 {
			parts := make([]string, 1000)
			for i := range parts {
				parts[i] = fmt.Sprintf("partition-%04d", j*1000+i)
			}
			if _, err := s.ClaimBatch(ctx, g, id, parts); err != nil {
				b.Fatal(err)
			}
		}
		k := s.keys(g)
		mem, err := raw.MemoryUsage(ctx, k.log, 0).Result()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(mem)/(1+10*1000), "bytes/change")
		if err := s.DeleteGroup(ctx, g, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadPlacementLog reads the log of a first placement of 10,000
// partitions (10 ClaimBatch calls of 1,000) with Changes, 1,000 entries per
// call: what every member's replica reads while a fleet places its
// partitions.
//
//	go test -run '^$' -bench ReadPlacementLog -benchtime 20x ./store/redisstore/
//
// On the machine above: 11-13 ms per 10,000 entries at the client (the
// chain check included); the server spends about 220 µs per XREAD of 1,000
// entries (INFO commandstats before and after), so 100 members reading a
// placement of 100,000 partitions cost Redis about 2.2 s of CPU. When the
// entries were read by XRANGE inside the check script instead, the read
// took 33 ms.
func BenchmarkReadPlacementLog(b *testing.B) {
	s, _ := newTestStore(b)
	ctx := context.Background()
	const g = "read"
	id, err := s.OpenSession(ctx, g, "host-a-12345", 1, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, g)
	if err != nil {
		b.Fatal(err)
	}
	for j := range 10 {
		parts := make([]string, 1000)
		for i := range parts {
			parts[i] = fmt.Sprintf("partition-%04d", j*1000+i)
		}
		if _, err := s.ClaimBatch(ctx, g, id, parts); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		v := snap.Version
		n := 0
		for n < 10000 {
			cs, next, err := s.Changes(ctx, g, v, 1000)
			if err != nil {
				b.Fatal(err)
			}
			n += len(cs)
			v = next
		}
	}
	b.ReportMetric(10000, "entries/op")
}
