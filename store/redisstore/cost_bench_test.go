package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// BenchmarkServerCost measures what each operation a member makes costs the
// Redis server: the usec INFO commandstats reports for the top-level
// commands (EVALSHA, EXEC, XREAD, GET; a script's own commands are inside
// its EVALSHA), per call and per row. It calibrates the simulation's store
// model (faultstore.RedisCost):
//
//	go test -run '^$' -bench ServerCost -benchtime 20x ./store/redisstore/
//
// commandstats counts the time the server spends executing commands; see
// faultstore.RedisCost for how it compares with the server's CPU time.
func BenchmarkServerCost(b *testing.B) {
	s, raw := newTestStore(b)
	ctx := context.Background()
	const g = "cost"
	ids := make([]string, store.MaxBatch)
	for i := range ids {
		ids[i] = fmt.Sprintf("partition-%06d", i)
	}
	sess, err := s.OpenSession(ctx, g, "host-a-12345", 1, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	top := []string{"evalsha", "exec", "xread", "get", "multi", "time"}
	measure := func(b *testing.B, rows int, op func(i int)) {
		before := serverUsec(b, raw, top...)
		i := 0
		for b.Loop() {
			op(i)
			i++
		}
		us := float64(serverUsec(b, raw, top...)-before) / float64(b.N)
		b.ReportMetric(us, "server-us/op")
		if rows > 0 {
			b.ReportMetric(us/float64(rows), "server-us/row")
		}
	}
	b.Run("KeepAlive", func(b *testing.B) {
		measure(b, 0, func(int) {
			if _, err := s.KeepAlive(ctx, g, sess, time.Hour); err != nil {
				b.Fatal(err)
			}
		})
	})
	// Claims of free partitions, then their releases, 1,000 per call.
	var held []store.Ownership
	b.Run("ClaimBatch1000", func(b *testing.B) {
		measure(b, len(ids), func(i int) {
			if held != nil {
				b.StopTimer()
				if _, err := s.ReleaseBatch(ctx, g, sess, held); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			rs, err := s.ClaimBatch(ctx, g, sess, ids)
			if err != nil {
				b.Fatal(err)
			}
			held = held[:0]
			for _, r := range rs {
				held = append(held, r.Ownership)
			}
		})
	})
	b.Run("ReleaseBatch1000", func(b *testing.B) {
		measure(b, len(ids), func(i int) {
			b.StopTimer()
			rs, err := s.ClaimBatch(ctx, g, sess, ids)
			if err != nil {
				b.Fatal(err)
			}
			held = held[:0]
			for _, r := range rs {
				held = append(held, r.Ownership)
			}
			b.StartTimer()
			if _, err := s.ReleaseBatch(ctx, g, sess, held); err != nil {
				b.Fatal(err)
			}
		})
	})
	// The partitions claimed once more: the log after before holds these
	// 1,000 claims.
	ps := make([]store.Partition, len(ids))
	for i, id := range ids {
		ps[i] = store.Partition{ID: id}
	}
	if _, err := s.SetPartitions(ctx, g, store.PartitionSet{Partitions: ps}); err != nil {
		b.Fatal(err)
	}
	before, err := s.Snapshot(ctx, g)
	if err != nil {
		b.Fatal(err)
	}
	rs, err := s.ClaimBatch(ctx, g, sess, ids)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Checkpoint", func(b *testing.B) {
		measure(b, 0, func(i int) {
			if err := s.Checkpoint(ctx, g, ids[0], rs[0].Ownership.Epoch, []byte("offset-12345678")); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("Records1000", func(b *testing.B) {
		measure(b, len(ids), func(int) {
			if _, err := s.Records(ctx, g, ids); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("Changes1000", func(b *testing.B) {
		measure(b, 1000, func(int) {
			got, _, err := s.Changes(ctx, g, before.Version, 1000)
			if err != nil || len(got) != 1000 {
				b.Fatalf("Changes: %d, %v", len(got), err)
			}
		})
	})
	b.Run("Snapshot1000", func(b *testing.B) {
		measure(b, 1+len(ids)+len(ids), func(int) {
			if _, err := s.Snapshot(ctx, g); err != nil {
				b.Fatal(err)
			}
		})
	})
}
