package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
)

// wakeModes are the two ways a Store learns of other connections' commits.
var wakeModes = []struct {
	name string
	opts []sqlitestore.Option
}{
	{"inotify", nil},
	{"poll", []sqlitestore.Option{sqlitestore.WithPollOnly(20 * time.Millisecond)}},
}

// A reader waiting in Changes on one Store is woken by a commit through
// another Store on the same file (as it would be by another process).
func TestWakeAcrossStores(t *testing.T) {
	for _, m := range wakeModes {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "herd.db")
			a := open(t, path)
			b := open(t, path, m.opts...)
			if _, err := a.OpenSession(ctx, "g", "m", 1, time.Minute); err != nil {
				t.Fatal(err)
			}
			v := mustSnap(t, b, "g").Version
			type reply struct {
				cs  []store.Change
				err error
			}
			got := make(chan reply, 1)
			for i := range 20 {
				go func() {
					cs, next, err := b.Changes(ctx, "g", v, 10)
					for err == nil && len(cs) == 0 { // a backend may return empty-handed
						cs, next, err = b.Changes(ctx, "g", next, 10)
					}
					got <- reply{cs, err}
				}()
				if _, err := a.SetPartitions(ctx, "g", store.PartitionSet{Partitions: []store.Partition{{ID: fmt.Sprint(i)}}}); err != nil {
					t.Fatal(err)
				}
				select {
				case r := <-got:
					if r.err != nil || len(r.cs) != 1 || r.cs[0].Kind != store.PartitionsSet {
						t.Fatalf("Changes woken by another Store's SetPartitions: %+v, %v", r.cs, r.err)
					}
					v = r.cs[0].Version
				case <-time.After(5 * time.Second):
					t.Fatalf("Changes on one Store not woken within 5s by a commit through another")
				}
			}
		})
	}
}

// A reader waiting in Changes wakes when the group is deleted, through
// another Store, and finds its version gone; one waiting when its Store
// closes gets ErrUnavailable.
func TestChangesWokenByDeleteAndClose(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	a := open(t, path)
	b := open(t, path)
	if _, err := a.OpenSession(ctx, "g", "m", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	v := mustSnap(t, b, "g").Version
	errs := make(chan error, 1)
	go func() {
		_, _, err := b.Changes(ctx, "g", v, 10)
		errs <- err
	}()
	if err := a.DeleteGroup(ctx, "g", true); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !errors.Is(err, store.ErrVersionGone) {
			t.Fatalf("Changes waiting while the group was deleted: %v; want ErrVersionGone", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Changes not woken within 5s by DeleteGroup")
	}
	go func() {
		_, _, err := b.Changes(ctx, "g", store.Version{}, 10)
		errs <- err
	}()
	// The reader may not be waiting yet when Close runs; either way it
	// must return ErrUnavailable promptly.
	b.Close()
	select {
	case err := <-errs:
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Changes while its store closed: %v; want ErrUnavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Changes not ended within 5s by Close")
	}
}

// BenchmarkWake measures how long after a commit through one Store a reader
// waiting in Changes on another Store on the same file returns with it
// (metric wake-µs, the median), with inotify and with data_version polled
// every 1 ms and 10 ms. Run: go test -run X -bench Wake ./store/sqlitestore
func BenchmarkWake(b *testing.B) {
	modes := []struct {
		name string
		opts []sqlitestore.Option
	}{
		{"inotify", nil},
		{"poll=1ms", []sqlitestore.Option{sqlitestore.WithPollOnly(time.Millisecond)}},
		{"poll=10ms", []sqlitestore.Option{sqlitestore.WithPollOnly(10 * time.Millisecond)}},
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			ctx := b.Context()
			path := filepath.Join(b.TempDir(), "herd.db")
			w := open(b, path)
			r := open(b, path, m.opts...)
			sess, err := w.OpenSession(ctx, "g", "m", 1, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			v := mustSnapB(b, r, "g").Version
			got := make(chan time.Time)
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				for {
					cs, next, err := r.Changes(rctx, "g", v, 10)
					if err != nil {
						return
					}
					if len(cs) > 0 {
						got <- time.Now()
					}
					v = next
				}
			}()
			var lat []time.Duration
			for b.Loop() {
				o, err := store.Claim(ctx, w, "g", "p", sess)
				if err != nil {
					b.Fatal(err)
				}
				committed := time.Now()
				lat = append(lat, (<-got).Sub(committed))
				_ = o
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "wake-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-wake-µs")
		})
	}
}

// BenchmarkIdle measures the CPU that 16 Stores, each with a reader
// waiting in Changes, use while nothing is written (metric
// cpu-%-per-store, of one core), with inotify and with polling.
func BenchmarkIdle(b *testing.B) {
	modes := []struct {
		name string
		opts []sqlitestore.Option
	}{
		{"inotify", nil},
		{"poll=1ms", []sqlitestore.Option{sqlitestore.WithPollOnly(time.Millisecond)}},
		{"poll=10ms", []sqlitestore.Option{sqlitestore.WithPollOnly(10 * time.Millisecond)}},
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			path := filepath.Join(b.TempDir(), "herd.db")
			const n = 16
			for range n {
				s := open(b, path, m.opts...)
				go func() {
					v := store.Version{}
					for ctx.Err() == nil {
						_, next, err := s.Changes(ctx, "g", v, 10)
						if err == nil {
							v = next
						}
					}
				}()
			}
			time.Sleep(100 * time.Millisecond) // let them settle into waiting
			cpu0, t0 := cpuTime(), time.Now()
			for b.Loop() {
				time.Sleep(50 * time.Millisecond)
			}
			b.ReportMetric(100*(cpuTime()-cpu0).Seconds()/time.Since(t0).Seconds()/n, "cpu-%-per-store")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mustSnapB(b *testing.B, s store.Store, g string) *store.Snapshot {
	b.Helper()
	snap, err := s.Snapshot(b.Context(), g)
	if err != nil {
		b.Fatal(err)
	}
	return snap
}
