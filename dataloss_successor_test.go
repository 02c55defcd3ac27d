package herd_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// lossFleet is a small fleet over one memstore, each member behind its own
// faultstore, whose handlers count up and checkpoint every 100 ms. It
// records, per partition, the last checkpoint the store accepted, and every
// handler that started below the floor the test set.
type lossFleet struct {
	t       *testing.T
	ctx     context.Context
	st      *memstore.Store
	ttl     time.Duration
	members map[string]*herd.Member
	faults  map[string]*faultstore.Store

	mu       sync.Mutex
	accepted map[string]uint64   // partition -> last checkpoint accepted
	floor    map[string]uint64   // partition -> a new owner must start at least here
	below    []string            // handlers started below the floor
	starts   map[string][]string // partition -> member of each start, in order
}

func newLossFleet(t *testing.T, ctx context.Context, ttl time.Duration, partitions int) *lossFleet {
	f := &lossFleet{
		t: t, ctx: ctx, st: memstore.New(), ttl: ttl,
		members: map[string]*herd.Member{}, faults: map[string]*faultstore.Store{},
		accepted: map[string]uint64{}, floor: map[string]uint64{}, starts: map[string][]string{},
	}
	if _, err := f.st.SetPartitions(ctx, "g", store.PartitionSet{Partitions: herd.Numbered(partitions)}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *lossFleet) join(id string) {
	f.t.Helper()
	fs := faultstore.Wrap(f.st)
	m, err := herd.Join(f.ctx, fs, herd.Config{
		Group: "g", Member: id, SessionTTL: f.ttl,
		Logger: slog.New(slog.DiscardHandler),
		Handler: func(c *herd.Claim) error {
			pos := faultDecode(c.LastCheckpoint())
			f.mu.Lock()
			f.starts[c.Partition] = append(f.starts[c.Partition], id)
			if fl := f.floor[c.Partition]; pos < fl {
				f.below = append(f.below, fmt.Sprintf("%s started %s at epoch %d from checkpoint %d, below %d", id, c.Partition, c.Epoch, pos, fl))
			}
			f.mu.Unlock()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-c.Context().Done():
					return nil
				case <-tick.C:
				}
				pos++
				var b [8]byte
				binary.BigEndian.PutUint64(b[:], pos)
				if c.Checkpoint(context.Background(), b[:]) == nil {
					f.mu.Lock()
					f.accepted[c.Partition] = max(f.accepted[c.Partition], pos)
					f.mu.Unlock()
				}
			}
		},
	})
	if err != nil {
		f.t.Fatalf("join %s: %v", id, err)
	}
	f.members[id], f.faults[id] = m, fs
}

// raiseFloor makes every checkpoint accepted so far a floor.
func (f *lossFleet) raiseFloor() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, v := range f.accepted {
		f.floor[p] = max(f.floor[p], v)
	}
}

func (f *lossFleet) running() int {
	n := 0
	for _, m := range f.members {
		n += len(m.Owned())
	}
	return n
}

func (f *lossFleet) check(partitions int) {
	f.t.Helper()
	f.mu.Lock()
	below := append([]string(nil), f.below...)
	f.mu.Unlock()
	for _, b := range below {
		f.t.Error(b)
	}
	if n := f.running(); n != partitions {
		f.t.Errorf("%d partitions run after the recovery, want %d", n, partitions)
	}
}

func (f *lossFleet) leaveAll() {
	f.t.Helper()
	for id, m := range f.members {
		f.faults[id].SetCut(false)
		f.faults[id].SetLatency(0)
		if err := m.Leave(f.ctx); err != nil {
			f.t.Errorf("leave %s: %v", id, err)
		}
	}
}

// TestDataLossOutageLongerThanFence: the store is unreachable for longer
// than the fence (4 s, TTL 2 s), every member fences itself, and the store
// comes back empty. One member reconnects first, the three others 500 ms
// later. No partition may start below the checkpoint accepted before the
// outage: the first member must leave the others' partitions alone until
// they have restored them, although its session was fenced, not reported
// expired.
func TestDataLossOutageLongerThanFence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		const ttl, parts = 2 * time.Second, 16
		f := newLossFleet(t, ctx, ttl, parts)
		ids := []string{"m1", "m2", "m3", "m4"}
		for _, id := range ids {
			f.join(id)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := f.running(); n != parts {
			t.Fatalf("%d partitions run before the outage, want %d", n, parts)
		}
		for _, id := range ids {
			f.faults[id].SetCut(true)
		}
		time.Sleep(4 * time.Second)
		f.st.Wipe()
		f.raiseFloor()
		f.faults["m1"].SetCut(false)
		time.Sleep(500 * time.Millisecond)
		for _, id := range ids[1:] {
			f.faults[id].SetCut(false)
		}
		time.Sleep(4 * ttl)
		synctest.Wait()
		f.check(parts)
		f.leaveAll()
	})
}

// TestDataLossOldOwnerDoesNotBeatSuccessor: o loses partition 0 to s (o is
// cut off past its TTL), s goes on from o's checkpoint; then the store
// loses its data while s is cut off, and o reconnects first with its old
// checkpoint. s's newer checkpoint must win: whoever runs the partition
// next starts at least from s's last accepted checkpoint.
func TestDataLossOldOwnerDoesNotBeatSuccessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		const ttl = 2 * time.Second
		f := newLossFleet(t, ctx, ttl, 1)
		f.join("o")
		time.Sleep(time.Second)
		synctest.Wait()
		f.join("s")
		time.Sleep(time.Second)
		synctest.Wait()
		if got := f.members["o"].Owned(); len(got) != 1 {
			t.Fatalf("o owns %v, want partition 0", got)
		}
		f.faults["o"].SetCut(true)
		time.Sleep(3 * ttl) // o fences, its session expires, s takes over
		synctest.Wait()
		if got := f.members["s"].Owned(); len(got) != 1 {
			t.Fatalf("s owns %v after o's session expired, want partition 0", got)
		}
		f.faults["s"].SetCut(true)
		f.st.Wipe()
		f.raiseFloor()
		f.faults["o"].SetCut(false) // o restores its old checkpoint first
		time.Sleep(300 * time.Millisecond)
		f.faults["s"].SetCut(false)
		time.Sleep(4 * ttl)
		synctest.Wait()
		f.check(1)
		f.leaveAll()
	})
}
