package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/balance"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// ReconcileCost is what one read of the group (one reconcile) costs one herd
// member of a large group when it is the only member in its process, as in a
// deployment, and its store client returns a fresh copy of the group on
// every read, as the client of a remote store decodes one. Every member of a
// fleet pays this for every read, whatever its share of the partitions: it
// computes the whole assignment from the whole group. See ProbeReconcile.
type ReconcileCost struct {
	Members    int `json:"members"`
	Partitions int `json:"partitions"`
	// Reads is the number of reads measured.
	Reads int `json:"reads"`
	// CPU is the process CPU time per read: herd's reconcile and the copy
	// of the group the store client returns (not the store's own work).
	CPU time.Duration `json:"cpu_per_read_ns"`
	// Copy is the part of CPU spent copying the group, a lower bound of
	// what a real client spends decoding it.
	Copy time.Duration `json:"copy_per_read_ns"`
	// Alloc is the memory allocated per read, the copy included.
	Alloc int64 `json:"alloc_per_read_bytes"`
	// SnapshotBytes is the size of one copy of the group.
	SnapshotBytes int64 `json:"snapshot_bytes"`
	// Work is the working memory of one reconcile besides the snapshot:
	// what a read allocates when the member's reusable buffers are cold,
	// minus what it allocates when they are warm.
	Work int64 `json:"work_bytes"`
	// Held is the member's live heap between reads (session, handlers and
	// their goroutines, partitions, buffers not counted).
	Held int64 `json:"held_bytes"`
}

// LargeScenario returns the largest scenario of Scenarios(), the one the
// reconcile probe measures.
func LargeScenario() Scenario {
	var out Scenario
	for _, sc := range Scenarios() {
		if sc.Large && sc.Members*sc.Partitions > out.Members*out.Partitions {
			out = sc
		}
	}
	return out
}

// ProbeReconcile measures ReconcileCost for a group of members x partitions.
// It must run inside a testing/synctest bubble with idle = synctest.Wait,
// and nothing else should run in the process meanwhile.
//
// The group lives in a memstore: members-1 sessions that do nothing hold
// their fair share, and one real herd member joins and takes its own. The
// member's store client copies every snapshot, as a remote client decodes
// one. Then, reads times, the member's log is made to answer
// ErrVersionGone (the member re-reads the group and finds nothing to do:
// the cost of every full read, at a session's start or when the log
// cannot be continued; a read during a rebalance costs about the same,
// plus claims and releases of the member's own share).
func ProbeReconcile(ctx context.Context, members, partitions int, idle func()) (*ReconcileCost, error) {
	const group, reads = "probe", 20
	if members < 2 || partitions < 1 {
		return nil, errors.New("sim: probe: need at least 2 members and 1 partition")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ms := memstore.New()
	ps := PartitionSet(partitions)
	if _, err := ms.SetPartitions(ctx, group, store.PartitionSet{Partitions: ps}); err != nil {
		return nil, err
	}
	// The others hold exactly their quota of a fair assignment that
	// counts one more member: the member that joins gets the rest.
	var others []balance.Member
	for i := range members - 1 {
		id, err := ms.OpenSession(ctx, group, MemberID(i), 1, 24*time.Hour)
		if err != nil {
			return nil, err
		}
		others = append(others, balance.Member{ID: id})
	}
	bps := make([]balance.Partition, len(ps))
	for i, p := range ps {
		bps[i] = balance.Partition{ID: p.ID}
	}
	target := balance.Assign(balance.Input{Members: append(others, balance.Member{ID: "probe"}), Partitions: bps})
	for p, owner := range target {
		if owner == "probe" {
			continue
		}
		if _, err := store.Claim(ctx, ms, group, p, owner); err != nil {
			return nil, err
		}
	}

	// The store's shared list of records exists before and after: it is
	// the store's memory, not the member's.
	if _, err := ms.Snapshot(ctx, group); err != nil {
		return nil, err
	}
	heap0 := liveHeap()
	cs := &copyingStore{Store: ms, resync: make(chan struct{})}
	m, err := herd.Join(ctx, cs, herd.Config{
		Group: group, Member: "probe", Logger: slog.New(slog.DiscardHandler),
		Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil },
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		cancel()
		<-m.Done()
	}()
	settle := func() {
		time.Sleep(time.Second) // past JoinSettle and the member's gap between reads
		idle()
	}
	settle()
	if got, want := len(m.Owned()), partitions/members; got < want {
		return nil, fmt.Errorf("sim: probe: the member took %d partitions, want %d", got, want)
	}
	res := &ReconcileCost{Members: members, Partitions: partitions}
	if _, err := ms.Snapshot(ctx, group); err != nil {
		return nil, err
	}
	runtime.GC() // and liveHeap's: the pools are empty
	res.Held = int64(liveHeap()) - int64(heap0)

	// One read with cold buffers (two collections empty the pools), then
	// warm ones.
	resync := func() error {
		n0 := cs.reads.Load()
		cs.resync <- struct{}{}
		settle()
		if n := cs.reads.Load() - n0; n != 1 {
			return fmt.Errorf("sim: probe: %d reads after one resync, want 1", n)
		}
		return nil
	}
	runtime.GC()
	runtime.GC()
	a0 := allocated()
	if err := resync(); err != nil {
		return nil, err
	}
	cold := allocated() - a0

	a0, cpu0, copy0 := allocated(), processCPU(), cs.copyNs.Load()
	for range reads {
		if err := resync(); err != nil {
			return nil, err
		}
	}
	res.Reads = reads
	res.CPU = (processCPU() - cpu0) / reads
	res.Copy = time.Duration(cs.copyNs.Load()-copy0) / reads
	res.Alloc = int64(allocated()-a0) / reads
	res.SnapshotBytes = cs.bytes.Load()
	res.Work = max(0, int64(cold)-res.Alloc)
	return res, ctx.Err()
}

// allocated is the number of bytes allocated by the process so far.
func allocated() uint64 {
	a, _ := memSample()
	return a
}

// copyingStore returns a deep copy of every snapshot, as a remote store's
// client decodes one, and makes the member read the group anew whenever
// resync receives (see Changes).
type copyingStore struct {
	store.Store
	resync chan struct{}
	reads  atomic.Int64
	copyNs atomic.Int64
	bytes  atomic.Int64
}

func (c *copyingStore) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	s, err := c.Store.Snapshot(ctx, group)
	if err != nil {
		return nil, err
	}
	c.reads.Add(1)
	t0 := realNow()
	out, n := copySnapshot(s)
	c.copyNs.Add(int64(realNow() - t0))
	c.bytes.Store(n)
	return out, nil
}

// copySnapshot copies s, strings and checkpoints included, and returns the
// copy's size in bytes.
func copySnapshot(s *store.Snapshot) (*store.Snapshot, int64) {
	n := int64(unsafe.Sizeof(store.SessionInfo{}))*int64(len(s.Sessions)) +
		int64(unsafe.Sizeof(store.Partition{}))*int64(len(s.Partitions)) +
		int64(unsafe.Sizeof(store.Ownership{}))*int64(len(s.Owners))
	str := func(x string) string {
		n += int64(len(x))
		return strings.Clone(x)
	}
	out := &store.Snapshot{
		Sessions:           make([]store.SessionInfo, len(s.Sessions)),
		Partitions:         make([]store.Partition, len(s.Partitions)),
		Owners:             make([]store.Ownership, len(s.Owners)),
		PartitionSetStored: s.PartitionSetStored,
		Malformed:          s.Malformed, // read-only, like the snapshot
		Version:            s.Version,
	}
	for i, x := range s.Sessions {
		x.ID, x.Member = str(x.ID), str(x.Member)
		out.Sessions[i] = x
	}
	for i, x := range s.Partitions {
		x.ID = str(x.ID)
		out.Partitions[i] = x
	}
	for i, x := range s.Owners {
		x.Partition, x.Session, x.Member = str(x.Partition), str(x.Session), str(x.Member)
		if x.Checkpoint != nil {
			x.Checkpoint = append([]byte(nil), x.Checkpoint...)
			n += int64(len(x.Checkpoint))
		}
		out.Owners[i] = x
	}
	return out, n
}

// Changes answers store.ErrVersionGone, as a store whose log was trimmed
// past the reader, once for every receive on c.resync (ending a call that
// waits), so that the member reads the group anew.
func (c *copyingStore) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	gone := fmt.Errorf("sim: probe: resync: %w", store.ErrVersionGone)
	select {
	case <-c.resync:
		return nil, after, gone
	default:
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type reply struct {
		cs  []store.Change
		v   store.Version
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		cs, v, err := c.Store.Changes(cctx, group, after, max)
		ch <- reply{cs, v, err}
	}()
	select {
	case r := <-ch:
		return r.cs, r.v, r.err
	case <-c.resync:
		cancel()
		<-ch
		return nil, after, gone
	}
}
