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
	// spare: channels for waiters, each of room 1 (a waiter is handed its
	// turn by a send), made by New and reused. A channel made inside a
	// testing/synctest bubble may not be used outside it: Turns shared by
	// the members of a process (herd's heavy steps) run by tests in
	// several bubbles hand turns over on channels made outside them, as a
	// channel semaphore made at package initialization would.
	spare []chan struct{}
}

// spares is how many waiter channels New makes; more are made as needed.
const spares = 1024

// New returns Turns with capacity n (at least 1).
func New(n int) *Turns {
	t := &Turns{cap: max(n, 1), spare: make([]chan struct{}, spares)}
	for i := range t.spare {
		t.spare[i] = make(chan struct{}, 1)
	}
	return t
}

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
	// A channel made here is not kept: it may belong to this caller's
	// bubble.
	var ready chan struct{}
	spared := len(t.spare) > 0
	if spared {
		ready, t.spare = t.spare[len(t.spare)-1], t.spare[:len(t.spare)-1]
	} else {
		ready = make(chan struct{}, 1)
	}
	keep := func() {
		if spared {
			t.spare = append(t.spare, ready)
		}
	}
	q := 1
	if first {
		q = 0
	}
	t.queue[q] = append(t.queue[q], ready)
	t.mu.Unlock()
	select {
	case <-ready:
		t.mu.Lock()
		keep()
		t.mu.Unlock()
		return true
	case <-done:
	case <-closed:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	defer keep()
	if i := slices.Index(t.queue[q], ready); i >= 0 {
		t.queue[q] = slices.Delete(t.queue[q], i, i+1)
		return false
	}
	// Handed a turn as the wait ended: pass it on.
	<-ready
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
			ready <- struct{}{} // its room of 1 is free: it is out of spare
			return
		}
	}
	t.held--
}
