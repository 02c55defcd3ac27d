package sqlitestore_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
)

// The cost of the write calls, each one transaction and one fsync of the
// WAL (synchronous=FULL): go test -run X -bench 'Claim|KeepAlive|Checkpoint' ./store/sqlitestore

func BenchmarkClaim(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "herd.db"))
	sess, _ := s.OpenSession(b.Context(), "g", "m", 1, time.Hour)
	for b.Loop() {
		if _, err := store.Claim(b.Context(), s, "g", "p", sess); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimBatch claims 1,000 partitions per transaction (metric
// µs/claim).
func BenchmarkClaimBatch(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "herd.db"))
	sess, _ := s.OpenSession(b.Context(), "g", "m", 1, time.Hour)
	ps := make([]string, store.MaxBatch)
	for i := range ps {
		ps[i] = fmt.Sprintf("partition-%06d", i)
	}
	for b.Loop() {
		if _, err := s.ClaimBatch(b.Context(), "g", sess, ps); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(ps)), "µs/claim")
}

func BenchmarkKeepAlive(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "herd.db"))
	sess, _ := s.OpenSession(b.Context(), "g", "m", 1, time.Hour)
	for b.Loop() {
		if _, err := s.KeepAlive(b.Context(), "g", sess, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckpoint(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "herd.db"))
	sess, _ := s.OpenSession(b.Context(), "g", "m", 1, time.Hour)
	o, _ := store.Claim(b.Context(), s, "g", "p", sess)
	v := make([]byte, 64)
	for b.Loop() {
		if err := s.Checkpoint(b.Context(), "g", "p", o.Epoch, v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshot10k reads a group of 10,000 owned partitions and 16
// sessions.
func BenchmarkSnapshot10k(b *testing.B) {
	ctx := b.Context()
	s := open(b, filepath.Join(b.TempDir(), "herd.db"))
	ps := make([]store.Partition, 10_000)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprintf("%d", i)}
	}
	if _, err := s.SetPartitions(ctx, "g", store.PartitionSet{Partitions: ps}); err != nil {
		b.Fatal(err)
	}
	var sessions []string
	for i := range 16 {
		id, _ := s.OpenSession(ctx, "g", fmt.Sprintf("m%d", i), 1, time.Hour)
		sessions = append(sessions, id)
	}
	for i := 0; i < len(ps); i += store.MaxBatch {
		batch := make([]string, 0, store.MaxBatch)
		for _, p := range ps[i:min(i+store.MaxBatch, len(ps))] {
			batch = append(batch, p.ID)
		}
		if _, err := s.ClaimBatch(ctx, "g", sessions[(i/store.MaxBatch)%16], batch); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		snap, err := s.Snapshot(ctx, "g")
		if err != nil || len(snap.Owners) != len(ps) {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlacement16x10k is the store's part of a first placement of
// 10,000 partitions on 16 members of separate Stores (as separate
// processes would have), each claiming its share with ClaimBatch and
// reading the group once, all at once: the time of one placement per op.
// (The member of herd today claims one partition per call: 10,000
// commits instead of 16.)
func BenchmarkPlacement16x10k(b *testing.B) {
	ctx := b.Context()
	path := filepath.Join(b.TempDir(), "herd.db")
	const members, parts = 16, 10_000
	var stores []*sqlitestore.Store
	for range members {
		stores = append(stores, open(b, path))
	}
	ps := make([]store.Partition, parts)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprint(i)}
	}
	for b.Loop() {
		if err := stores[0].DeleteGroup(ctx, "g", true); err != nil {
			b.Fatal(err)
		}
		if _, err := stores[0].SetPartitions(ctx, "g", store.PartitionSet{Partitions: ps}); err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for m, s := range stores {
			wg.Go(func() {
				sess, err := s.OpenSession(ctx, "g", fmt.Sprint(m), 1, time.Minute)
				if err != nil {
					b.Error(err)
					return
				}
				var mine []string
				for i := m; i < parts; i += members {
					mine = append(mine, ps[i].ID)
				}
				for len(mine) > 0 {
					n := min(len(mine), store.MaxBatch)
					if _, err := s.ClaimBatch(ctx, "g", sess, mine[:n]); err != nil {
						b.Error(err)
						return
					}
					mine = mine[n:]
				}
				if _, err := s.Snapshot(ctx, "g"); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
}

// BenchmarkReadLog10k reads the log of a placement of 10,000 partitions
// (ten ClaimBatch calls) with Changes, 10,000 changes per call, as a
// member's feed reads it, and reports the bytes and allocations per
// change:
//
//	go test -run '^$' -bench ReadLog10k -benchtime 20x ./store/sqlitestore/
func BenchmarkReadLog10k(b *testing.B) {
	ctx := b.Context()
	s := open(b, filepath.Join(b.TempDir(), "herd.db"))
	const parts = 10_000
	ps := make([]store.Partition, parts)
	ids := make([]string, parts)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprintf("partition-%06d", i)}
		ids[i] = ps[i].ID
	}
	if _, err := s.SetPartitions(ctx, "g", store.PartitionSet{Partitions: ps}); err != nil {
		b.Fatal(err)
	}
	sess, err := s.OpenSession(ctx, "g", "host-000-12345", 1, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, "g")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < parts; i += store.MaxBatch {
		if _, err := s.ClaimBatch(ctx, "g", sess, ids[i:i+store.MaxBatch]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		cs, _, err := s.Changes(ctx, "g", snap.Version, parts)
		if err != nil || len(cs) != parts {
			b.Fatalf("%d changes, %v", len(cs), err)
		}
	}
}
