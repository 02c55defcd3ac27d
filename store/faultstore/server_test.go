package faultstore_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// TestServerQueues: calls of two connections to one server are served one
// at a time, each in its service time; a snapshot costs its rows too.
func TestServerQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		inner := memstore.New()
		sv := faultstore.NewServer(faultstore.Cost{Call: 10 * time.Millisecond, KeepAlive: 5 * time.Millisecond, Write: time.Millisecond, Partition: time.Millisecond})
		a, b := faultstore.Wrap(inner, faultstore.WithServer(sv)), faultstore.Wrap(inner, faultstore.WithServer(sv))
		start := time.Now()
		id, err := a.OpenSession(ctx, "g", "m", 1, time.Hour) // 10 + 1 ms
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 11*time.Millisecond {
			t.Fatalf("OpenSession took %v; want its service time, 11ms", took)
		}
		// Ten renewals on each connection at once: 20 x 5 ms, one at a time.
		start = time.Now()
		var wg sync.WaitGroup
		for range 10 {
			for _, s := range []*faultstore.Store{a, b} {
				wg.Go(func() {
					if _, err := s.KeepAlive(ctx, "g", id, time.Hour); err != nil {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
		if took := time.Since(start); took != 100*time.Millisecond {
			t.Fatalf("20 renewals at once took %v; want 100ms (served one at a time)", took)
		}
		if _, err := a.SetPartitions(ctx, "g", store.PartitionSet{}); err != nil { // 10 ms
			t.Fatal(err)
		}
		start = time.Now()
		if _, err := b.Snapshot(ctx, "g"); err != nil { // 10 ms + 1 session
			t.Fatal(err)
		}
		if took := time.Since(start); took != 11*time.Millisecond {
			t.Fatalf("Snapshot of one session took %v; want 11ms", took)
		}
		if got, want := sv.Busy(), 11*time.Millisecond+100*time.Millisecond+10*time.Millisecond+11*time.Millisecond; got != want {
			t.Fatalf("server busy %v; want %v", got, want)
		}
	})
}
