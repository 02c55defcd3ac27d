// Package memstore is the in-process backend of the store contract, for
// tests, demos, simulations and single-process use. It is not durable.
//
// Everything lives behind one mutex. There are no background goroutines:
// session expiry is checked lazily against the store's clock at the start of
// every call (expired sessions are then removed and logged). That makes the
// store usable inside testing/synctest bubbles, where simulations run
// thousands of members in virtual time.
//
// # Shared snapshots
//
// Snapshot is cheap on large groups: the partition set and the ownership
// list of a snapshot are shared, immutable slices that are rebuilt only when
// something changed since the previous snapshot (and then by patching a copy
// of the previous list when only a few records changed). Callers must treat
// a returned Snapshot as read-only; the store itself never mutates a slice it
// has handed out. Snapshots carry no checkpoints (the store contract), so a
// Checkpoint call does not touch the shared list at all. Ownership values
// returned by Claim, checkpoint included, are the caller's own copies.
//
// Snapshot.Malformed is always empty: the store holds only records it wrote
// itself, after validating every argument.
//
// # Log
//
// Each group keeps its log in memory (see log.go): the last entries, at
// least WithLogLimit of them. Changes waits on a channel that the next
// append closes, so a reader blocks without a goroutine or a timer, in
// virtual time too. Expiry being lazy, a session whose TTL has passed is
// logged as expired by the first call that comes after (any call, on any
// group): a reader waiting in Changes sees it then, or when a member calls
// ExpireSessions at the time KeepAlive or ExpireSessions told it.
package memstore

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/herdhq/herd/store"
)

// Option configures a Store.
type Option func(*Store)

// WithLogLimit sets how many entries of each group's log the store keeps at
// least (default DefaultLogLimit); a reader further behind gets
// store.ErrVersionGone and takes a new snapshot. n < 1 is read as 1.
func WithLogLimit(n int) Option {
	return func(s *Store) { s.logLimit = max(n, 1) }
}

// WithClock sets the store's clock (default time.Now). The store's clock
// alone decides session expiry, Remaining and epochs.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// Store is the in-process backend. Create it with New.
type Store struct {
	now      func() time.Time
	logLimit int

	mu     sync.Mutex
	closed bool
	lastID uint64            // session ids are a counter, never reused
	groups map[string]*group // created on first use, never removed
	expiry expiryHeap        // every live session of every group, soonest expiry first
	at     time.Time         // the clock at the start of the current call: Change.At of what it logs
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{now: time.Now, logLimit: DefaultLogLimit, groups: map[string]*group{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

type session struct {
	id        string
	member    string
	weight    int
	group     *group
	expires   time.Time // dead once the clock reaches it
	heapIndex int
}

type record struct {
	own   store.Ownership // Checkpoint is replaced on write, never mutated; never shown in a snapshot
	pos   int             // index in group.sorted; -1 while in group.pending
	dirty bool            // changed since group.view was built
	// since is when the record got its epoch (Claim, Restore), checkpointed
	// when its checkpoint was last written (zero: never), on the store's
	// clock; Records reports them as ages.
	since, checkpointed time.Time
}

type group struct {
	sessions   []*session          // live sessions sorted by id
	byID       map[string]*session // live sessions
	partitions []store.Partition   // sorted by id; immutable, shared with snapshots
	partsSet   bool                // SetPartitions was called (the set may be empty)
	digest     string              // store.Digest of partitions, when partsSet
	kind       string              // the group's kind, "" if none named yet
	records    map[string]*record  // every ownership record by partition
	loads      []store.Load        // latest load per partition, sorted; immutable, shared with snapshots

	// The sorted ownership list is maintained incrementally: sorted holds
	// the records in partition order, new records wait in pending until the
	// next Snapshot merges them in, and view is the immutable list the last
	// snapshots shared. dirty lists the records changed since view was built.
	sorted    []*record
	pending   []*record
	view      []store.Ownership
	viewValid bool
	dirty     []*record

	log groupLog
}

// begin starts every call: it checks the arguments (args is the error of
// the store.Validate function of the call, nil if valid), the context and
// the store, takes the lock and expires the sessions whose TTL has passed.
// The caller unlocks.
func (s *Store) begin(ctx context.Context, op string, args error) (time.Time, error) {
	if args != nil {
		return time.Time{}, fmt.Errorf("memstore: %s: %w", op, args)
	}
	if ctx == nil {
		return time.Time{}, fmt.Errorf("memstore: %s: nil context (pass context.Background() or a call's own): %w", op, store.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return time.Time{}, fmt.Errorf("memstore: %s: %w", op, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return time.Time{}, fmt.Errorf("memstore: %s: store is closed: %w", op, store.ErrUnavailable)
	}
	now := s.now()
	s.at = now.Round(0) // the entries this call appends are stamped with it
	s.expireLocked(now)
	return now, nil
}

// expireLocked removes the sessions that are dead at now and logs each. The records they own are left as they are: a record
// naming a dead session is free to Claim.
func (s *Store) expireLocked(now time.Time) {
	for len(s.expiry) > 0 && !now.Before(s.expiry[0].expires) {
		ss := heap.Pop(&s.expiry).(*session)
		ss.group.removeSession(ss)
		s.logChange(ss.group, store.Change{Kind: store.SessionExpired, Session: ss.id})
	}
}

// group returns the group named name, creating it if create is set (nil otherwise).
func (s *Store) group(name string, create bool) *group {
	g := s.groups[name]
	if g == nil && create {
		g = &group{byID: map[string]*session{}, records: map[string]*record{}}
		s.groups[name] = g
	}
	return g
}

func (g *group) removeSession(ss *session) {
	delete(g.byID, ss.id)
	if i, ok := slices.BinarySearchFunc(g.sessions, ss.id, func(x *session, id string) int { return strings.Compare(x.id, id) }); ok {
		g.sessions = slices.Delete(g.sessions, i, i+1)
	}
}

// alive reports whether the session named id is alive (expired sessions
// have been removed by begin).
func (g *group) alive(id string) bool {
	return id != "" && g.byID[id] != nil
}

// touch marks r as changed since the shared view was built.
func (g *group) touch(r *record) {
	if r.pos < 0 || r.dirty || !g.viewValid {
		return // pending records and a stale view are rebuilt anyway
	}
	r.dirty = true
	g.dirty = append(g.dirty, r)
	if len(g.dirty) > len(g.sorted)/4 {
		// Patching would copy about as much as a rebuild: rebuild instead.
		g.invalidateView()
	}
}

func (g *group) invalidateView() {
	for _, r := range g.dirty {
		r.dirty = false
	}
	g.dirty = nil
	g.viewValid = false
}

// ownersView returns the shared, immutable ownership list, merging pending
// records and rebuilding or patching the view only if something changed.
func (g *group) ownersView() []store.Ownership {
	if len(g.pending) > 0 {
		slices.SortFunc(g.pending, func(a, b *record) int { return strings.Compare(a.own.Partition, b.own.Partition) })
		merged := make([]*record, 0, len(g.sorted)+len(g.pending))
		i, j := 0, 0
		for i < len(g.sorted) || j < len(g.pending) {
			if j == len(g.pending) || i < len(g.sorted) && g.sorted[i].own.Partition < g.pending[j].own.Partition {
				merged = append(merged, g.sorted[i])
				i++
			} else {
				merged = append(merged, g.pending[j])
				j++
			}
		}
		for k, r := range merged {
			r.pos = k
		}
		g.sorted, g.pending = merged, nil
		g.invalidateView()
	}
	switch {
	case !g.viewValid:
		view := make([]store.Ownership, len(g.sorted))
		for i, r := range g.sorted {
			view[i] = r.shown()
		}
		g.view, g.viewValid = view, true
	case len(g.dirty) > 0:
		view := slices.Clone(g.view)
		for _, r := range g.dirty {
			view[r.pos] = r.shown()
			r.dirty = false
		}
		g.view, g.dirty = view, nil
	}
	return g.view
}

// shown is the record as a snapshot shows it: without its checkpoint.
func (r *record) shown() store.Ownership {
	o := r.own
	o.Checkpoint = nil
	return o
}

// OpenSession implements store.Store.
func (s *Store) OpenSession(ctx context.Context, group, member string, weight int, ttl time.Duration) (string, error) {
	now, err := s.begin(ctx, "open session", store.ValidateOpenSession(group, member, weight, ttl))
	if err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	g := s.group(group, true)
	s.lastID++
	ss := &session{
		// Fixed-width hex: ids sort in creation order, so appending keeps
		// g.sessions sorted.
		id:      fmt.Sprintf("s%016x", s.lastID),
		member:  member,
		weight:  weight,
		group:   g,
		expires: now.Add(ttl),
	}
	g.byID[ss.id] = ss
	g.sessions = append(g.sessions, ss)
	heap.Push(&s.expiry, ss)
	s.logChange(g, store.Change{Kind: store.SessionOpened, Session: ss.id, Member: member, Weight: weight})
	return ss.id, nil
}

// KeepAlive implements store.Store.
func (s *Store) KeepAlive(ctx context.Context, group, session string, ttl time.Duration) (time.Duration, error) {
	now, err := s.begin(ctx, "keep alive", store.ValidateKeepAlive(group, session, ttl))
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	g := s.group(group, false)
	if g == nil || !g.alive(session) {
		return 0, fmt.Errorf("memstore: keep alive %q: %w", session, store.ErrSessionExpired)
	}
	ss := g.byID[session]
	ss.expires = now.Add(ttl)
	heap.Fix(&s.expiry, ss.heapIndex)
	return g.nextExpiry(now), nil
}

// CloseSession implements store.Store.
func (s *Store) CloseSession(ctx context.Context, group, session string) error {
	if _, err := s.begin(ctx, "close session", store.ValidateCloseSession(group, session)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	g := s.group(group, false)
	if g == nil || !g.alive(session) {
		return nil
	}
	ss := g.byID[session]
	heap.Remove(&s.expiry, ss.heapIndex)
	g.removeSession(ss)
	s.logChange(g, store.Change{Kind: store.SessionClosed, Session: session})
	return nil
}

// SetPartitions implements store.Store.
func (s *Store) SetPartitions(ctx context.Context, group string, ps store.PartitionSet) (store.SetResult, error) {
	if err := store.ValidateSetPartitions(group, ps); err != nil {
		return store.SetResult{}, fmt.Errorf("memstore: set partitions: %w", err)
	}
	var digest string
	if ps.Mode != store.SetKindOnly {
		digest = store.Digest(ps.Partitions) // outside the lock: it reads the whole set
	}
	if _, err := s.begin(ctx, "set partitions", nil); err != nil {
		return store.SetResult{}, err
	}
	defer s.mu.Unlock()
	g := s.group(group, true)
	write, res, err := store.DecideSet(group, store.GroupSet{Kind: g.kind, Stored: g.partsSet, Digest: g.digest}, ps, digest)
	if err != nil {
		return res, fmt.Errorf("memstore: set partitions: %w", err)
	}
	g.kind = res.Kind
	if !write {
		return res, nil
	}
	set := slices.Clone(ps.Partitions)
	slices.SortFunc(set, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
	g.partitions, g.partsSet, g.digest = set, true, digest
	// The entry shares the set, which is never mutated.
	s.logChange(g, store.Change{Kind: store.PartitionsSet, Partitions: set})
	return res, nil
}

// Snapshot implements store.Store. The returned snapshot shares its
// Partitions and Owners with other snapshots: treat it as read-only.
func (s *Store) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	now, err := s.begin(ctx, "snapshot", store.ValidateGroup(group))
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	g := s.group(group, false)
	if g == nil {
		return &store.Snapshot{}, nil
	}
	sessions := make([]store.SessionInfo, len(g.sessions))
	for i, ss := range g.sessions {
		sessions[i] = store.SessionInfo{ID: ss.id, Member: ss.member, Remaining: ss.expires.Sub(now), Weight: ss.weight}
	}
	return &store.Snapshot{Sessions: sessions, Partitions: g.partitions, Owners: g.ownersView(), PartitionSetStored: g.partsSet,
		Kind: g.kind, Loads: g.loads, Version: g.log.version()}, nil
}
