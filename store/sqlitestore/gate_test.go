package sqlitestore

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

// The gate serves waiting writes in arrival order, renewals first; a
// waiter that gives up leaves the queue, and one handed the gate as it
// gives up passes it on.
func TestGateOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g gate
		never := make(chan struct{})
		if !g.enter(false, never, never) {
			t.Fatal("enter on a free gate failed")
		}
		var mu sync.Mutex
		var order []string
		quit := map[string]chan struct{}{}
		wait := func(name string, urgent bool) {
			quit[name] = make(chan struct{})
			q := quit[name]
			go func() {
				if !g.enter(urgent, q, never) {
					mu.Lock()
					order = append(order, name+" gave up")
					mu.Unlock()
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				g.leave()
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
		g.leave()
		synctest.Wait()
		want := []string{"gone gave up", "r1", "r2", "a", "b", "c"}
		if !slices.Equal(order, want) {
			t.Fatalf("order %q; want %q", order, want)
		}
		if g.held || len(g.urgent)+len(g.normal) > 0 {
			t.Fatalf("gate after everyone left: held %v, %d+%d waiting", g.held, len(g.urgent), len(g.normal))
		}
	})
}

// A waiter handed the gate just as it gives up passes it on; nobody is
// left waiting on a gate that is free.
func TestGateHandOverOnGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for range 100 {
			var g gate
			never := make(chan struct{})
			g.enter(false, never, never)
			q := make(chan struct{})
			got := make(chan bool)
			go func() { got <- g.enter(false, q, never) }()
			synctest.Wait()
			close(q)
			g.leave() // races the give-up
			if <-got {
				g.leave()
			}
			if g.held || len(g.normal) > 0 {
				t.Fatalf("gate after the give-up: held %v, %d waiting", g.held, len(g.normal))
			}
		}
	})
}
