package dashboard_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/dashboard"
	"github.com/herdhq/herd/store"
)

// calls counts a real store's reads.
type calls struct {
	store.Store
	snapshots, records atomic.Int64
}

func (c *calls) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	c.snapshots.Add(1)
	return c.Store.Snapshot(ctx, group)
}

func (c *calls) Records(ctx context.Context, group string, ps []string) ([]store.Record, error) {
	c.records.Add(1)
	return c.Store.Records(ctx, group, ps)
}

// refreshJSON is the part of a "refresh" event the tests read.
type refreshJSON struct {
	Seq     int   `json:"seq"`
	NextMs  int64 `json:"nextMs"`
	Members []struct {
		Session, Member string
		TTLms           int64 `json:"ttlMs"`
	} `json:"members"`
	N     int    `json:"n"`
	CkAge string `json:"ckAge"`
	Jobs  []struct {
		Key, Owner string
		Running    bool
		Runs       uint64
	} `json:"jobs"`
}

// nextRefresh returns the next refresh event of evs, skipping others.
func nextRefresh(t *testing.T, evs <-chan sseEvent, d time.Duration) refreshJSON {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ev := next(t, evs, time.Until(deadline))
		if ev.name == "refresh" {
			var r refreshJSON
			mustJSON(t, ev.data, &r)
			return r
		}
	}
}

// ages decodes a refresh's checkpoint ages.
func (r refreshJSON) ages(t *testing.T) []int32 {
	b, err := base64.StdEncoding.DecodeString(r.CkAge)
	if err != nil || len(b) != 4*r.N {
		t.Fatalf("ckAge: %v, %d bytes for %d partitions", err, len(b), r.N)
	}
	a := make([]int32, r.N)
	for i := range a {
		a[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return a
}

// Ten pages of a group cost what one does: one read of the TTLs and
// checkpoints per interval (a Snapshot and the Records of the set, two
// batches for 1,500 partitions), every page gets the reads in order, the
// refresher stops with the last page and starts with the next. Counted on
// real stores.
func TestRefreshShared(t *testing.T) {
	const parts, interval, linger = 1500, 250 * time.Millisecond, 2 * time.Second
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			group := uniqueGroup(t)
			joinCheckpointing(t, b.rw, group, "a", herd.Numbered(parts), 2*time.Second, "05") // 300 checkpoints
			c := &calls{Store: b.ro}
			h := dashboard.New(c, dashboard.WithLogger(quiet), dashboard.WithRefresh(interval), dashboard.WithLinger(linger))
			base := serve(t, h)
			first, stopFirst := openEventsStop(t, base, group)
			r := nextRefresh(t, first, time.Minute)
			if r.N != parts || len(r.Members) != 1 || r.Members[0].Member != "a" || r.Members[0].TTLms <= 0 {
				t.Fatalf("first refresh: n %d, members %+v", r.N, r.Members)
			}
			pages, stops := []<-chan sseEvent{}, []func(){}
			for range 9 {
				p, stop := openEventsStop(t, base, group)
				pages, stops = append(pages, p), append(stops, stop)
			}
			pages = append(pages, first)
			// Every page sees the reads in order (a read that failed, as
			// SQLite's may while the member writes, is not sent).
			var last int
			for i, p := range pages {
				seq := 0
				for seq < r.Seq+3 {
					n := nextRefresh(t, p, time.Minute).Seq // a slow read spaces the next ones out
					if n <= seq {
						t.Fatalf("page %d: refresh %d after %d", i, n, seq)
					}
					seq = n
				}
				last = max(last, seq)
			}
			// A read under way may have begun after the last one sent.
			snaps, recs := c.snapshots.Load(), c.records.Load()
			if reads := snaps - 1; reads < int64(last) || reads > int64(last)+1 {
				t.Errorf("10 pages, %d reads: %d snapshot reads (one is the follower's), want %d or one more", last, snaps, last+1)
			}
			if recs > 2*int64(last)+2 {
				t.Errorf("10 pages, %d reads: %d Records calls, want at most 2 per read", last, recs)
			}
			t.Logf("%s: 10 pages, %d refreshes: %d snapshots, %d Records calls", b.name, last, snaps, recs)

			// Checkpoint ages: a partition has one exactly when its
			// record holds a checkpoint (read after the refresh: a
			// checkpoint written in between only adds one).
			r = nextRefresh(t, first, time.Minute)
			ages := r.ages(t)
			ids := make([]string, 0, parts)
			for _, p := range herd.Numbered(parts) {
				ids = append(ids, p.ID)
			}
			slices.Sort(ids)
			with := map[string]bool{}
			for start := 0; start < parts; start += store.MaxBatch {
				rs, err := b.rw.Records(context.Background(), group, ids[start:min(start+store.MaxBatch, parts)])
				if err != nil {
					t.Fatal(err)
				}
				for _, rec := range rs {
					with[rec.Partition] = len(rec.Checkpoint) > 0
				}
			}
			aged := 0
			for i, id := range ids {
				switch {
				case ages[i] >= 0 && !with[id]:
					t.Fatalf("partition %s: checkpoint age %d ms, but its record has no checkpoint", id, ages[i])
				case ages[i] == -1 && with[id]:
					t.Logf("partition %s: checkpointed after the refresh read", id)
				case ages[i] >= 0:
					aged++
				}
			}
			if aged == 0 {
				t.Fatal("no partition has a checkpoint age")
			}

			// Once the last page has left, the refresher reads no more;
			// it stops with the follower after the linger, and a page
			// that opens starts one again.
			for _, stop := range append(stops, stopFirst) {
				if dashboard.Refreshers(h) != 1 {
					t.Fatalf("%d refreshers with pages open, want 1", dashboard.Refreshers(h))
				}
				stop()
			}
			left := time.Now()
			time.Sleep(interval) // a read under way when the last page left ends
			idle := c.snapshots.Load()
			waitFor(t, "the refresher to stop", linger+5*time.Second, func() bool { return dashboard.Refreshers(h) == 0 })
			if since := time.Since(left); since < linger {
				t.Errorf("the refresher stopped %v after the last page left, before the linger of %v", since, linger)
			}
			if n := c.snapshots.Load() - idle; n != 0 {
				t.Errorf("%d snapshot reads while no page was open, want 0", n)
			}
			again := openEvents(t, base, group)
			nextRefresh(t, again, time.Minute)
			if n := dashboard.Refreshers(h); n != 1 {
				t.Errorf("%d refreshers after a page opened again, want 1", n)
			}
		})
	}
}

// waitFor polls cond until it holds, failing after d.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond) // polling the condition
	}
}

// joinCheckpointing joins a member whose handler writes a checkpoint as
// soon as it gets a partition (of those whose id ends in one of digits,
// all if ""), then runs it until it loses it.
func joinCheckpointing(t *testing.T, st store.Store, group, id string, ps []store.Partition, ttl time.Duration, digits string) *member {
	t.Helper()
	return joinHandler(t, st, group, id, ps, ttl, func(c *herd.Claim) error {
		if digits == "" || strings.ContainsRune(digits, rune(c.Partition[len(c.Partition)-1])) {
			_ = c.Checkpoint(c.Context(), []byte("at "+c.Partition)) // may fail on a loaded machine: the tests read the records
		}
		<-c.Context().Done()
		return nil
	})
}
