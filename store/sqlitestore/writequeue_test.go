package sqlitestore

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

// state reports whether the turn is held and how many wait for it.
func (q *writeQueue) state() (bool, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held, len(q.queue[0]) + len(q.queue[1])
}

// Waiters are served in arrival order, renewals before the others; a
// waiter that gives up leaves the queue.
func TestWriteQueueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q writeQueue
		if !q.take(false, nil, nil) {
			t.Fatal("take of a free turn failed")
		}
		var mu sync.Mutex
		var order []string
		quit := map[string]chan struct{}{}
		wait := func(name string, renewal bool) {
			quit[name] = make(chan struct{})
			end := quit[name]
			go func() {
				if !q.take(renewal, end, nil) {
					mu.Lock()
					order = append(order, name+" gave up")
					mu.Unlock()
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				q.leave()
			}()
			synctest.Wait() // queued before the next one
		}
		wait("a", false)
		wait("b", false)
		wait("gone", false)
		wait("r1", true)
		wait("c", false)
		wait("r2", true)
		close(quit["gone"])
		synctest.Wait()
		q.leave()
		synctest.Wait()
		want := []string{"gone gave up", "r1", "r2", "a", "b", "c"}
		if !slices.Equal(order, want) {
			t.Fatalf("order %q; want %q", order, want)
		}
		if held, waiting := q.state(); held || waiting != 0 {
			t.Fatalf("after everyone left: held %v, %d waiting", held, waiting)
		}
	})
}

// A waiter handed the turn just as it gives up passes it on; nobody is
// left waiting while the turn is free.
func TestWriteQueueHandOverOnGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for range 100 {
			var q writeQueue
			q.take(false, nil, nil)
			end := make(chan struct{})
			got := make(chan bool)
			go func() { got <- q.take(false, end, nil) }()
			synctest.Wait()
			close(end)
			q.leave() // races the give-up
			if <-got {
				q.leave()
			}
			if held, waiting := q.state(); held || waiting != 0 {
				t.Fatalf("after the give-up: held %v, %d waiting", held, waiting)
			}
		}
	})
}

// The second of two ends (the Store closing) ends a wait too.
func TestWriteQueueClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q writeQueue
		q.take(false, nil, nil)
		closed := make(chan struct{})
		got := make(chan bool)
		go func() { got <- q.take(true, nil, closed) }()
		synctest.Wait()
		close(closed)
		if <-got {
			t.Error("take gave the turn after closed, with it held")
		}
		if held, waiting := q.state(); !held || waiting != 0 {
			t.Errorf("after the closed wait: held %v, %d waiting; want held, none waiting", held, waiting)
		}
	})
}
