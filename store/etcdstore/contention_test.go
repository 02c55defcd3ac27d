package etcdstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// TestConcurrentBatches: 16 sessions claim 150 partitions each at once
// (two transactions each), then release them at once, as a fleet placing
// and leaving its partitions: every claim and release succeeds, and no
// transaction is retried (writes of different partitions of one group do
// not conflict: they do not compare the group's sequence); the time it
// took is logged (go test -run TestConcurrentBatches -v ./store/etcdstore/).
func TestConcurrentBatches(t *testing.T) {
	s, _ := openTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const group, members, each = "contended", 16, 150
	held := make([][]store.Ownership, members)
	var wg sync.WaitGroup
	began := time.Now()
	for m := range members {
		wg.Go(func() {
			sess, err := s.OpenSession(ctx, group, fmt.Sprintf("m%d", m), 1, 10*time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			var ids []string
			for i := range each {
				ids = append(ids, fmt.Sprintf("p%d-%d", m, i))
			}
			rs, err := s.ClaimBatch(ctx, group, sess, ids)
			if err != nil {
				t.Error(err)
				return
			}
			for _, r := range rs {
				if r.Err != nil {
					t.Error(r.Err)
					return
				}
				held[m] = append(held[m], r.Ownership)
			}
		})
	}
	wg.Wait()
	claimed := time.Since(began)
	began = time.Now()
	for m := range members {
		wg.Go(func() {
			if len(held[m]) == 0 {
				return
			}
			errs, err := s.ReleaseBatch(ctx, group, held[m][0].Session, held[m])
			if err != nil {
				t.Error(err)
				return
			}
			for _, err := range errs {
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d sessions: %d claims each in %v, released in %v", members, each, claimed.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	if n := s.conflicts.Load(); n != 0 {
		t.Errorf("%d transactions found a compare changed; want none (the sessions claim and release different partitions)", n)
	}
	assertNoPending(t, s, group)
}
