package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/store"
)

// BenchmarkSnapshotBigCheckpoints reads a group of 256 owned partitions
// whose checkpoints are 256 KiB each (64 MiB in all). Besides time and
// allocated bytes per Snapshot it reports the slowest PING another client
// sent while the snapshots ran (ping-max-ms): Redis runs one script at a
// time, so that is how long a Snapshot blocks every client, renewals
// included.
//
//	go test -run '^$' -bench SnapshotBigCheckpoints -benchtime 20x ./store/redisstore/
//
// On a 2-core AMD EPYC with Redis 7.0.15 on loopback: 0.33 ms, 104 KB
// allocated and a slowest PING of 1.1-1.3 ms per Snapshot; when snapshots
// still carried the checkpoints, 334-336 ms, 136 MB and 309-312 ms.
func BenchmarkSnapshotBigCheckpoints(b *testing.B) {
	s, raw := newTestStore(b)
	ctx := context.Background()
	const g, n = "bench", 256
	ps := make([]store.Partition, n)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprint("p", i)}
	}
	if _, err := s.SetPartitions(ctx, g, store.PartitionSet{Partitions: ps}); err != nil {
		b.Fatal(err)
	}
	id, err := s.OpenSession(ctx, g, "m", 1, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	cp := bytes.Repeat([]byte{'c'}, 256<<10)
	for _, p := range ps {
		o, err := store.Claim(ctx, s, g, p.ID, id)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Checkpoint(ctx, g, p.ID, o.Epoch, cp); err != nil {
			b.Fatal(err)
		}
	}

	var worst atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			if err := raw.Ping(ctx).Err(); err != nil {
				return
			}
			if d := int64(time.Since(t0)); d > worst.Load() {
				worst.Store(d)
			}
			time.Sleep(time.Millisecond)
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		snap, err := s.Snapshot(ctx, g)
		if err != nil {
			b.Fatal(err)
		}
		if len(snap.Owners) != n {
			b.Fatalf("snapshot has %d records; want %d", len(snap.Owners), n)
		}
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(worst.Load())/1e6, "ping-max-ms")
}

// BenchmarkSnapshot100k reads a group of 100,000 partitions, without and
// with a record for each, and reports the server's time per Snapshot
// (server-ms: the usec of EVALSHA and EXEC in INFO commandstats, which
// include the commands they run) besides the client's.
//
//	go test -run '^$' -bench Snapshot100k -benchtime 10x ./store/redisstore/
//
// On a 2-core AMD EPYC with Redis 7.0.15 on loopback (2026-11-25, three
// runs each), with the partition set read from partlist: 0.14-0.29 ms of
// server time without records (5 ms on the client), 44-46 ms with them
// (131-137 ms). From the partitions hash: 29-39 ms and 90-102 ms (82-105
// and 271-287 ms on the client). When the whole read was one script (at
// commit e54c089): 51-54 ms and 134-174 ms. With records, when the records
// were sorted rather than taken in the order of the partition set (commit
// 2c07965, same machine, 2026-11-25, three runs of 20x each): 117-130 ms
// on the client against 98-112 ms. With the records read as HGETALL's raw
// reply (rawhash.go) instead of go-redis' map (2026-11-26, a 2-core AMD
// EPYC slower than the one above, three alternated runs of 20x each):
// 170-183 ms a Snapshot, 71-77 ms of it the server's, and 172 allocations,
// against 240-268 ms, 76-84 ms and 200,385. With the raw reply collected
// in a buffer sized from its header (replyWriter), same machine and day:
// 168-180 ms and 26.7 MB allocated a Snapshot, against 178-202 ms and
// 48.7 MB.
func BenchmarkSnapshot100k(b *testing.B) {
	s, raw := newTestStore(b)
	ctx := context.Background()
	const g, n = "bench", 100_000
	ps := make([]store.Partition, n)
	ids := make([]string, n)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprint(i)}
		ids[i] = ps[i].ID
	}
	if _, err := s.SetPartitions(ctx, g, store.PartitionSet{Partitions: ps}); err != nil {
		b.Fatal(err)
	}
	id, err := s.OpenSession(ctx, g, "m", 1, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	for _, owned := range []bool{false, true} {
		if owned {
			for i := 0; i < n; i += store.MaxBatch {
				if _, err := s.ClaimBatch(ctx, g, id, ids[i:i+store.MaxBatch]); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(fmt.Sprintf("records=%v", owned), func(b *testing.B) {
			before := serverUsec(b, raw, "evalsha", "exec")
			for b.Loop() {
				if _, err := s.Snapshot(ctx, g); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(serverUsec(b, raw, "evalsha", "exec")-before)/1000/float64(b.N), "server-ms/op")
		})
	}
}

// serverUsec sums the usec INFO commandstats reports for the commands.
func serverUsec(b *testing.B, raw *redis.Client, cmds ...string) int64 {
	b.Helper()
	info, err := raw.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		for _, c := range cmds {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+c+":"); ok {
				for _, f := range strings.Split(rest, ",") {
					if v, ok := strings.CutPrefix(f, "usec="); ok {
						n, _ := strconv.ParseInt(v, 10, 64)
						total += n
					}
				}
			}
		}
	}
	return total
}
