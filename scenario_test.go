package herd_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/herdtest"
	"github.com/herdhq/herd/internal/tracker"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// fleet runs many members on one in-process store inside a synctest bubble
// and checks the invariants after every step.
type fleet struct {
	t       *testing.T
	ctx     context.Context
	st      *memstore.Store
	group   string
	parts   []string
	tr      *tracker.Tracker
	cfg     herd.Config
	members map[string]*fleetMember
	nextID  int

	mu       sync.Mutex
	accepted map[string]uint64 // partition -> highest checkpoint value accepted by the store
	rejected map[string]int    // member -> checkpoints rejected
	late     int               // checkpoints accepted for a stale claim (must stay 0)
	// staleClaims: partition -> epoch of claims held by a stalled member.
	staleClaims map[string]uint64
	errs        []string
}

type fleetMember struct {
	m      *herd.Member
	cancel context.CancelFunc
	fault  *faultstore.Store
	gate   *herdtest.Gate
}

func newFleet(t *testing.T, ctx context.Context, partitions int) *fleet {
	f := &fleet{
		t: t, ctx: ctx, st: memstore.New(), group: "g", tr: tracker.New(),
		cfg:      herd.Config{Logger: slog.New(slog.DiscardHandler)},
		members:  map[string]*fleetMember{},
		accepted: map[string]uint64{}, rejected: map[string]int{},
	}
	f.setPartitions(partitions)
	return f
}

func (f *fleet) setPartitions(n int) {
	f.t.Helper()
	ps := herd.Numbered(n)
	f.parts = f.parts[:0]
	for _, p := range ps {
		f.parts = append(f.parts, p.ID)
	}
	if _, err := f.st.SetPartitions(f.ctx, f.group, store.PartitionSet{Partitions: ps}); err != nil {
		f.t.Fatal(err)
	}
}

func decode(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// handler checkpoints progress every second: value = last checkpoint + 1.
// A new owner must see at least every value accepted before it claimed.
func (f *fleet) handler(id string) herd.Handler {
	return func(c *herd.Claim) error {
		pos := decode(c.LastCheckpoint())
		f.mu.Lock()
		if acc := f.accepted[c.Partition]; pos < acc {
			f.errs = append(f.errs, fmt.Sprintf("%s claimed %s at epoch %d with checkpoint %d, but %d was accepted before", id, c.Partition, c.Epoch, pos, acc))
		}
		f.mu.Unlock()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-c.Context().Done():
				// Final checkpoint on the way out (allowed during a handoff).
				f.checkpoint(id, c, pos+1)
				return nil
			case <-tick.C:
				pos++
				f.checkpoint(id, c, pos)
			}
		}
	}
}

func (f *fleet) checkpoint(id string, c *herd.Claim, v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	err := c.Checkpoint(context.Background(), b[:])
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err == nil:
		if e, ok := f.staleClaims[c.Partition]; ok && e == c.Epoch {
			f.late++
		}
		if v < f.accepted[c.Partition] {
			f.errs = append(f.errs, fmt.Sprintf("checkpoint of %s went backwards: %d accepted after %d", c.Partition, v, f.accepted[c.Partition]))
		}
		f.accepted[c.Partition] = max(f.accepted[c.Partition], v)
	case errors.Is(err, herd.ErrNotOwner):
		f.rejected[id]++
	case errors.Is(err, store.ErrUnavailable):
		// A member cut off from the store: nothing written.
	default:
		f.errs = append(f.errs, fmt.Sprintf("%s: checkpoint %s: unexpected error %v", id, c.Partition, err))
	}
}

func (f *fleet) join(n int) []string {
	f.t.Helper()
	var ids []string
	for range n {
		f.nextID++
		id := "m" + strconv.Itoa(f.nextID)
		fm := &fleetMember{fault: faultstore.Wrap(f.st), gate: &herdtest.Gate{}}
		cfg := f.cfg
		cfg.Group, cfg.Member = f.group, id
		herdtest.WithGate(&cfg, fm.gate)
		cfg.Handler = f.tr.Wrap(id, f.handler(id))
		ctx, cancel := context.WithCancel(f.ctx)
		m, err := herd.Join(ctx, fm.fault, cfg)
		if err != nil {
			cancel()
			f.t.Fatalf("join %s: %v", id, err)
		}
		fm.m, fm.cancel = m, cancel
		f.mu.Lock()
		f.members[id] = fm
		f.mu.Unlock()
		ids = append(ids, id)
	}
	return ids
}

func (f *fleet) live() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (f *fleet) drop(id string) *fleetMember {
	f.mu.Lock()
	defer f.mu.Unlock()
	fm := f.members[id]
	delete(f.members, id)
	return fm
}

// settle waits until the fleet is balanced over the live members and returns
// how long that took in virtual time.
func (f *fleet) settle(limit time.Duration) time.Duration {
	f.t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(f.ctx, limit)
	defer cancel()
	if err := f.tr.WaitBalanced(ctx, f.parts, f.live()); err != nil {
		f.t.Fatalf("after %v: %v", time.Since(start), err)
	}
	return time.Since(start)
}

// check verifies what must hold after every step.
func (f *fleet) check(step string, allowDouble bool) {
	f.t.Helper()
	if ok, why := f.tr.Balanced(f.parts, f.live()); !ok {
		f.t.Fatalf("%s: not balanced: %s", step, why)
	}
	if mc := f.tr.MaxConcurrent(); mc > 1 && !allowDouble {
		f.t.Fatalf("%s: %d handlers ran at once for one partition", step, mc)
	}
	// Checkpoints going back: snapshots carry none, so the handlers check
	// it, on every claim (against the values accepted before) and write.
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		f.t.Fatalf("%s: %d violations, first: %s", step, len(f.errs), f.errs[0])
	}
}

// measure runs change, waits for balance, checks invariants, and checks that
// the moves were the minimum.
func (f *fleet) measure(step string, limit time.Duration, change func()) time.Duration {
	f.t.Helper()
	return f.measureStall(step, limit, "", change)
}

// measureStall is measure for a step that ends a stall: the stalled
// member's handlers still existed while others ran its partitions, so two
// handlers at once are expected (their checkpoints are checked apart).
func (f *fleet) measureStall(step string, limit time.Duration, stalled string, change func()) time.Duration {
	f.t.Helper()
	before := f.tr.OwnersExcept(stalled)
	f.tr.Reset()
	change()
	took := f.settle(limit)
	f.check(step, stalled != "")
	if got, want := f.tr.Moves(), tracker.MinMoves(f.parts, before, f.live()); got != want {
		f.t.Fatalf("%s: %d partitions moved, minimum is %d", step, got, want)
	}
	f.t.Logf("%s: balanced after %v, %d moves", step, took, f.tr.Moves())
	return took
}

func TestScenarioLargeFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFleet(t, ctx, 1000)
		ttl := herd.DefaultSessionTTL

		// From nothing, 50 members join one after another: the first ones
		// take partitions the later ones get, so moves are not counted here.
		f.join(50)
		f.settle(5 * time.Second)
		f.check("50 members join", false)
		f.measure("10 more join", 2*time.Second, func() { f.join(10) })

		f.measure("5 leave gracefully", time.Second, func() {
			var wg sync.WaitGroup
			for _, id := range f.live()[:5] {
				fm := f.drop(id)
				wg.Go(func() {
					if err := fm.m.Leave(ctx); err != nil {
						t.Errorf("leave %s: %v", id, err)
					}
				})
			}
			wg.Wait()
		})

		took := f.measure("5 crash", ttl+2*time.Second, func() {
			for _, id := range f.live()[:5] {
				fm := f.drop(id)
				fm.cancel()
				<-fm.m.Done()
			}
		})
		if took > ttl+time.Second {
			t.Fatalf("crashed members' partitions took %v to be owned again, more than TTL+1s", took)
		}

		f.measure("partitions grow to 1200", 2*time.Second, func() { f.setPartitions(1200) })
		f.measure("partitions shrink to 900", 2*time.Second, func() { f.setPartitions(900) })

		// Cut one member off from the store for longer than its TTL: it must
		// cancel its handlers before anyone else starts them (the tracker
		// would see two handlers at once for a partition otherwise).
		cutID := f.live()[0]
		cut := f.drop(cutID)
		f.measure("a member is cut off from the store past its TTL", ttl+2*time.Second, func() { cut.fault.SetCut(true) })
		f.measure("the cut member reconnects and rejoins", 2*time.Second, func() {
			f.mu.Lock()
			f.members[cutID] = cut
			f.mu.Unlock()
			cut.fault.SetCut(false)
		})

		// Stall one member (as SIGSTOP would) past its TTL: it cannot cancel
		// its own handlers, so others take its partitions when its session
		// expires while its handlers still exist. On resume every checkpoint
		// it tries for the claims it held must be rejected.
		stallID := f.live()[0]
		stalled := f.drop(stallID)
		held := map[string]uint64{}
		snap, err := f.st.Snapshot(ctx, f.group)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range snap.Owners {
			if o.Session == stalled.m.Session() {
				held[o.Partition] = o.Epoch
			}
		}
		f.mu.Lock()
		f.staleClaims = held
		f.mu.Unlock()
		f.tr.Reset()
		stalled.gate.Pause()
		time.Sleep(ttl + 2*time.Second) // virtual time
		owners := f.tr.Owners()
		for p := range held {
			if n := f.tr.Runners(p, stallID); n != 1 {
				t.Fatalf("partition %s of the stalled member runs on %d other members %v after its TTL", p, n, owners[p])
			}
		}
		f.measureStall("the stalled member resumes and rejoins", 2*time.Second, stallID, func() {
			f.mu.Lock()
			f.members[stallID] = stalled
			f.mu.Unlock()
			stalled.gate.Resume()
		})
		f.mu.Lock()
		late, rejected := f.late, f.rejected[stallID]
		f.mu.Unlock()
		if late > 0 {
			t.Fatalf("%d checkpoints of the stalled member's old claims were accepted after it resumed", late)
		}
		if rejected == 0 {
			t.Fatalf("the stalled member tried no checkpoint after resuming; the test proves nothing")
		}
		t.Logf("stalled member: %d checkpoints rejected after resume, none accepted", rejected)

		// Everyone leaves; nothing may be left running.
		for _, id := range f.live() {
			if err := f.drop(id).m.Leave(ctx); err != nil {
				t.Fatal(err)
			}
		}
		snap, err = f.st.Snapshot(ctx, f.group)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Sessions) != 0 {
			t.Fatalf("%d sessions left after every member left", len(snap.Sessions))
		}
	})
}
