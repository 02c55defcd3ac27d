// Package turns hands out turns at something only a few may do at once,
// in the order they were asked for, with a class of waiters served before
// the others.
package turns

import (
	"slices"
	"sync"
)

// Turns hands out up to its capacity of turns at once. Waiters are served
// in the order they asked, those that asked with first before every other.
// The zero value has a capacity of 1.
type Turns struct {
	mu    sync.Mutex
	cap   int // 0: 1
	held  int
	queue [2][]chan struct{} // waiters: [0] first, [1] the others
}

// New returns Turns with capacity n (at least 1).
func New(n int) *Turns { return &Turns{cap: max(n, 1)} }

// Take waits for a turn until done or closed is closed (a nil channel
// never is); it reports whether it got one. The caller gives the turn
// back with Done.
func (t *Turns) Take(first bool, done, closed <-chan struct{}) bool {
	t.mu.Lock()
	if t.held < t.capacity() {
		t.held++
		t.mu.Unlock()
		return true
	}
	ready := make(chan struct{})
	q := 1
	if first {
		q = 0
	}
	t.queue[q] = append(t.queue[q], ready)
	t.mu.Unlock()
	select {
	case <-ready:
		return true
	case <-done:
	case <-closed:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := slices.Index(t.queue[q], ready); i >= 0 {
		t.queue[q] = slices.Delete(t.queue[q], i, i+1)
		return false
	}
	// Handed a turn as the wait ended: pass it on.
	t.handOver()
	return false
}

// TryTake takes a turn if one is free, without waiting.
func (t *Turns) TryTake() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held < t.capacity() {
		t.held++
		return true
	}
	return false
}

// Done gives back a turn Take or TryTake gave.
func (t *Turns) Done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handOver()
}

// InUse is how many turns are held.
func (t *Turns) InUse() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held
}

// Waiting is how many wait for a turn.
func (t *Turns) Waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queue[0]) + len(t.queue[1])
}

func (t *Turns) capacity() int { return max(t.cap, 1) }

// handOver gives a turn given back to the next waiter, or frees it.
// t.mu is held.
func (t *Turns) handOver() {
	for q := range t.queue {
		if len(t.queue[q]) > 0 {
			ready := t.queue[q][0]
			t.queue[q] = slices.Delete(t.queue[q], 0, 1)
			close(ready)
			return
		}
	}
	t.held--
}
