package sqlitestore

import (
	"slices"
	"sync"
)

// writeQueue admits one write transaction of a Store at a time, in the
// order they asked, renewals before every other (see writeAs). The zero
// value is ready to use.
type writeQueue struct {
	mu    sync.Mutex
	held  bool
	queue [2][]chan struct{} // waiters: [0] renewals, [1] the others
}

// take waits for the turn until done or closed is closed (a nil channel
// never is); it reports whether it got it. The caller gives it back with
// leave.
func (q *writeQueue) take(renewal bool, done, closed <-chan struct{}) bool {
	q.mu.Lock()
	if !q.held {
		q.held = true
		q.mu.Unlock()
		return true
	}
	ready := make(chan struct{}, 1) // handed the turn by a send (handOver)
	k := 1
	if renewal {
		k = 0
	}
	q.queue[k] = append(q.queue[k], ready)
	q.mu.Unlock()
	select {
	case <-ready:
		return true
	case <-done:
	case <-closed:
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := slices.Index(q.queue[k], ready); i >= 0 {
		q.queue[k] = slices.Delete(q.queue[k], i, i+1)
		return false
	}
	// Handed the turn as the wait ended: pass it on.
	<-ready
	q.handOver()
	return false
}

// leave gives back the turn take gave.
func (q *writeQueue) leave() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.handOver()
}

// handOver gives the turn to the next waiter, or frees it. q.mu is held.
func (q *writeQueue) handOver() {
	for k := range q.queue {
		if len(q.queue[k]) > 0 {
			ready := q.queue[k][0]
			q.queue[k] = slices.Delete(q.queue[k], 0, 1)
			ready <- struct{}{} // room of 1, sent once
			return
		}
	}
	q.held = false
}
