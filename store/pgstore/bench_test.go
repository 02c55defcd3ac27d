package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// benchGroup fills a group with n partitions claimed by 16 sessions.
func benchGroup(b *testing.B, s *Store, n int) (group string, sessions []string) {
	b.Helper()
	ctx := context.Background()
	group = "bench"
	ps := make([]store.Partition, n)
	ids := make([]string, n)
	for i := range ps {
		ids[i] = fmt.Sprintf("p%06d", i)
		ps[i] = store.Partition{ID: ids[i], Weight: 1}
	}
	if _, err := s.SetPartitions(ctx, group, store.PartitionSet{Partitions: ps}); err != nil {
		b.Fatal(err)
	}
	for i := range 16 {
		sess, err := s.OpenSession(ctx, group, fmt.Sprintf("m%d", i), 1, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		sessions = append(sessions, sess)
	}
	for i := 0; i < n; i += store.MaxBatch {
		batch := ids[i:min(i+store.MaxBatch, n)]
		if _, err := s.ClaimBatch(ctx, group, sessions[(i/store.MaxBatch)%16], batch); err != nil {
			b.Fatal(err)
		}
	}
	return group, sessions
}

// Snapshot of a group of 10,000 partitions and 16 sessions.
func BenchmarkSnapshot10k(b *testing.B) {
	s := openTest(b)
	group, _ := benchGroup(b, s, 10_000)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Snapshot(ctx, group); err != nil {
			b.Fatal(err)
		}
	}
}

// benchIDs are the ids benchGroup gives its first n partitions.
func benchIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("p%06d", i)
	}
	return ids
}

// ClaimBatch of 1,000 partitions the session holds (a new epoch each).
func BenchmarkClaimBatch1000(b *testing.B) {
	s := openTest(b)
	group, sessions := benchGroup(b, s, 1000)
	ids := benchIDs(1000)
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.ClaimBatch(ctx, group, sessions[0], ids); err != nil {
			b.Fatal(err)
		}
	}
}

// One Claim, one KeepAlive, one Checkpoint: the single operations.
func BenchmarkOps(b *testing.B) {
	s := openTest(b)
	group, sessions := benchGroup(b, s, 100)
	ctx := context.Background()
	o, err := store.Claim(ctx, s, group, "p000000", sessions[0])
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Claim", func(b *testing.B) {
		for b.Loop() {
			if _, err := store.Claim(ctx, s, group, "p000001", sessions[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("KeepAlive", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.KeepAlive(ctx, group, sessions[1], time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Checkpoint", func(b *testing.B) {
		for b.Loop() {
			if err := s.Checkpoint(ctx, group, "p000000", o.Epoch, []byte("position 12345")); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// ReleaseBatch of 1,000 partitions the session holds (claimed again,
// outside the timer, before each release).
func BenchmarkReleaseBatch1000(b *testing.B) {
	s := openTest(b)
	group, sessions := benchGroup(b, s, 1000)
	ids := benchIDs(1000)
	ctx := context.Background()
	held := make([]store.Ownership, len(ids))
	for b.Loop() {
		b.StopTimer()
		res, err := s.ClaimBatch(ctx, group, sessions[0], ids)
		if err != nil {
			b.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
			held[i] = r.Ownership
		}
		b.StartTimer()
		errs, err := s.ReleaseBatch(ctx, group, sessions[0], held)
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// A first placement: 16 sessions claim 625 partitions each, one after
// the other, of a new group of 10,000 that has no records yet (the fleet
// bench's steady scenario, without its processes). The group is made and
// deleted outside the timer.
func BenchmarkPlacement10k(b *testing.B) {
	s := openTest(b)
	ctx := context.Background()
	ps := make([]store.Partition, 10_000)
	ids := make([]string, len(ps))
	for i := range ps {
		ids[i] = fmt.Sprintf("p%06d", i)
		ps[i] = store.Partition{ID: ids[i], Weight: 1}
	}
	n := 0
	for b.Loop() {
		b.StopTimer()
		n++
		group := fmt.Sprintf("place%d", n)
		if _, err := s.SetPartitions(ctx, group, store.PartitionSet{Partitions: ps}); err != nil {
			b.Fatal(err)
		}
		sessions := make([]string, 16)
		for i := range sessions {
			sess, err := s.OpenSession(ctx, group, fmt.Sprintf("m%d", i), 1, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			sessions[i] = sess
		}
		b.StartTimer()
		for i, sess := range sessions {
			if _, err := s.ClaimBatch(ctx, group, sess, ids[i*625:(i+1)*625]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if err := s.DeleteGroup(ctx, group, true); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
