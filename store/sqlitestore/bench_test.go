package sqlitestore_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// The cost of the write calls, each one transaction and one fsync of the
// WAL (synchronous=FULL): go test -run X -bench 'Claim|KeepAlive|Checkpoint' ./store/sqlitestore

func BenchmarkClaim(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "herd.db"))
	sess, _ := s.OpenSession(b.Context(), "g", "m", 1, time.Hour)
	for b.Loop() {
		if _, err := s.Claim(b.Context(), "g", "p", sess); err != nil {
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
	o, _ := s.Claim(b.Context(), "g", "p", sess)
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
	if err := s.SetPartitions(ctx, "g", ps); err != nil {
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
