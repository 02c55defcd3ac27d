package herd

// The records this member released that its replica may still show as its
// own: plan does not release them again.

import (
	"sync"

	"github.com/herdhq/herd/store"
)

// releasedRecords holds, partition -> epoch, the records this member
// released (or found not its own) whose release the replica has not shown
// yet. Written by the reconcile loop and the releaser, read by plan.
type releasedRecords struct {
	mu     sync.Mutex
	epochs map[string]uint64
}

// noteReleased records that this member released the records held (or
// found them not its own), so that plan does not release them again while
// the replica has not shown the release yet.
func (m *Member) noteReleased(held []store.Ownership) {
	m.released.mu.Lock()
	defer m.released.mu.Unlock()
	for _, r := range held {
		m.released.epochs[r.Partition] = r.Epoch
	}
}

// releasedAlready reports whether this member released partition p at
// epoch; it forgets p once the replica shows a record that is not that one
// of this member (cur is the record's epoch, mine whether it names this
// member's session).
func (m *Member) releasedAlready(p string, epoch uint64, mine bool) bool {
	m.released.mu.Lock()
	defer m.released.mu.Unlock()
	e, ok := m.released.epochs[p]
	if ok && (!mine || e != epoch) {
		delete(m.released.epochs, p)
		return false
	}
	return ok
}
