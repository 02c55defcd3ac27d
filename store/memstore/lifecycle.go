package memstore

// Wiping and closing the store, the expiry heap, and what tests read directly.

import (
	"bytes"
	"cmp"

	"github.com/herdhq/herd/store"
)

// Wipe drops every session, partition set and record of every group, as a
// server restarted without persistence would; session ids are still never
// reused; readers of the logs find them gone. For tests of how a fleet
// recovers from a store that lost its data.
func (s *Store) Wipe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expiry = s.expiry[:0]
	for name, g := range s.groups {
		g.log.wake() // readers of the old log find it gone
		s.groups[name] = &group{byID: map[string]*session{}, records: map[string]*record{}}
	}
}

// Close wakes the readers of the logs; later calls fail with ErrUnavailable.
// Sessions are not touched (and, the store being in memory, are gone with it).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, g := range s.groups {
		g.log.wake()
	}
	return nil
}

func cloneOwnership(o store.Ownership) store.Ownership {
	o.Checkpoint = bytes.Clone(o.Checkpoint)
	return o
}

// expiryHeap orders live sessions by expiry (container/heap).
type expiryHeap []*session

func (h expiryHeap) Len() int { return len(h) }
func (h expiryHeap) Less(i, j int) bool {
	if c := h[i].expires.Compare(h[j].expires); c != 0 {
		return c < 0
	}
	return cmp.Less(h[i].id, h[j].id)
}
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex, h[j].heapIndex = i, j
}
func (h *expiryHeap) Push(x any) {
	ss := x.(*session)
	ss.heapIndex = len(*h)
	*h = append(*h, ss)
}
func (h *expiryHeap) Pop() any {
	old := *h
	ss := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	ss.heapIndex = -1
	return ss
}

// StoredCheckpoint returns a copy of the checkpoint the store holds for
// partition, without claiming it (Snapshot carries no checkpoints, and Claim
// changes the owner). It is for tests and tools that inspect an in-process
// group; ok is false if the partition has no record.
func (s *Store) StoredCheckpoint(group, partition string) (value []byte, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.group(group, false)
	if g == nil {
		return nil, false
	}
	r := g.records[partition]
	if r == nil {
		return nil, false
	}
	return append([]byte(nil), r.own.Checkpoint...), true
}
