package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// Reads of one store that run while its writes leave pending log keys and
// sequence them never find a pending key "gone": a read that listed the
// keys before another read dropped them from the store's cache (its later
// listing no longer had them) reads their values itself.
func TestConcurrentReadsOfPendingKeys(t *testing.T) {
	s, _ := openTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const g = "pending-race"
	ps := make([]store.Partition, 8)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprint(i)}
	}
	if _, err := s.SetPartitions(ctx, g, store.PartitionSet{Partitions: ps}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.DeleteGroup(context.Background(), g, true) }()
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 3 {
		wg.Go(func() {
			id, err := s.OpenSession(ctx, g, fmt.Sprintf("w%d", w), 1, time.Minute)
			if err != nil {
				errs <- err
				return
			}
			p := []string{fmt.Sprint(w)}
			for time.Now().Before(stop) {
				res, err := s.ClaimBatch(ctx, g, id, p)
				if err != nil {
					errs <- err
					return
				}
				if res[0].Err != nil {
					continue
				}
				if _, err := s.ReleaseBatch(ctx, g, id, []store.Ownership{res[0].Ownership}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if _, err := s.Snapshot(ctx, g); errors.Is(err, store.ErrCorrupt) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
