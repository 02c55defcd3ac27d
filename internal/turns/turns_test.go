package turns

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// Never more turns at once than the capacity, each waiter served in the
// end.
func TestCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(2)
		var running, most atomic.Int32
		var wg sync.WaitGroup
		release := make(chan struct{})
		for range 10 {
			wg.Go(func() {
				if !tr.Take(false, nil, nil) {
					t.Error("Take without an end gave no turn")
					return
				}
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				running.Add(-1)
				tr.Done()
			})
		}
		synctest.Wait() // two run, eight wait
		if n := running.Load(); n != 2 {
			t.Fatalf("%d running with 2 turns, want 2", n)
		}
		close(release)
		wg.Wait()
		if m := most.Load(); m != 2 {
			t.Errorf("at most %d ran at once, want 2", m)
		}
		if n := tr.InUse(); n != 0 {
			t.Errorf("%d turns held at the end, want 0", n)
		}
	})
}

// Waiters are served in arrival order, those asking first before the
// others; a waiter that gives up leaves the queue.
func TestOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr Turns // capacity 1
		if !tr.Take(false, nil, nil) {
			t.Fatal("Take of a free turn failed")
		}
		var mu sync.Mutex
		var order []string
		quit := map[string]chan struct{}{}
		wait := func(name string, first bool) {
			quit[name] = make(chan struct{})
			q := quit[name]
			go func() {
				if !tr.Take(first, q, nil) {
					mu.Lock()
					order = append(order, name+" gave up")
					mu.Unlock()
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				tr.Done()
			}()
			synctest.Wait() // queued before the next one
		}
		wait("a", false)
		wait("b", false)
		wait("gone", false)
		wait("f1", true)
		wait("c", false)
		wait("f2", true)
		close(quit["gone"])
		synctest.Wait()
		tr.Done()
		synctest.Wait()
		want := []string{"gone gave up", "f1", "f2", "a", "b", "c"}
		if !slices.Equal(order, want) {
			t.Fatalf("order %q; want %q", order, want)
		}
		if tr.InUse() != 0 || tr.Waiting() != 0 {
			t.Fatalf("after everyone left: %d held, %d waiting", tr.InUse(), tr.Waiting())
		}
	})
}

// A waiter handed a turn just as it gives up passes it on; nobody is left
// waiting while a turn is free.
func TestHandOverOnGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for range 100 {
			var tr Turns
			tr.Take(false, nil, nil)
			q := make(chan struct{})
			got := make(chan bool)
			go func() { got <- tr.Take(false, q, nil) }()
			synctest.Wait()
			close(q)
			tr.Done() // races the give-up
			if <-got {
				tr.Done()
			}
			if tr.InUse() != 0 || tr.Waiting() != 0 {
				t.Fatalf("after the give-up: %d held, %d waiting", tr.InUse(), tr.Waiting())
			}
		}
	})
}

// The second of two ends ends a wait too.
func TestClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr Turns
		tr.TryTake()
		closed := make(chan struct{})
		got := make(chan bool)
		go func() { got <- tr.Take(true, nil, closed) }()
		synctest.Wait()
		close(closed)
		if <-got {
			t.Error("Take gave a turn after closed, with none free")
		}
		if tr.TryTake() {
			t.Error("TryTake gave a second turn of one")
		}
	})
}

// Turns made outside testing/synctest bubbles hand turns over between
// goroutines of different bubbles (the members of tests run in parallel
// share herd's heavy steps' turns): a waiter in one is handed a turn given
// back in another.
func TestAcrossBubbles(t *testing.T) {
	tr := New(1)
	tr.TryTake()
	got := make(chan bool, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		synctest.Test(t, func(t *testing.T) {
			ok := tr.Take(false, nil, nil)
			if ok {
				tr.Done()
			}
			got <- ok
		})
	})
	for tr.Waiting() == 0 {
		runtime.Gosched()
	}
	synctest.Test(t, func(t *testing.T) { tr.Done() })
	wg.Wait()
	if !<-got {
		t.Fatal("the waiter got no turn")
	}
	if n := tr.InUse(); n != 0 {
		t.Fatalf("%d turns held at the end, want 0", n)
	}
}
