package herd

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// waitEnds runs f.wait(d, time.Hour) (the log busy: read just now) and
// reports how long it took, in the bubble's time.
func waitEnds(f *flow, d time.Duration, kick chan struct{}) <-chan time.Duration {
	f.read()
	ch := make(chan time.Duration, 1)
	go func() {
		t := time.Now()
		f.wait(d, time.Hour, kick, nil)
		ch <- time.Since(t)
	}()
	return ch
}

func TestFollowerWaitsWhileAMemberReceives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := allFlows.acquire("test\x00g")
		defer allFlows.release(f)
		kick := make(chan struct{}, 1)

		if took := <-waitEnds(f, time.Second, kick); took != 0 {
			t.Errorf("with nobody receiving the wait took %v; want none", took)
		}

		f.changed(true)
		done := waitEnds(f, time.Second, kick)
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		select {
		case took := <-done:
			t.Fatalf("the wait ended after %v while a member receives", took)
		default:
		}
		f.changed(false) // the last receiver has all it was to receive
		if took := <-done; took != 300*time.Millisecond {
			t.Errorf("the wait ended %v after it began; want 300ms, when nobody received any more", took)
		}

		f.changed(true)
		defer f.changed(false)
		done = waitEnds(f, time.Second, kick)
		time.Sleep(100 * time.Millisecond)
		f.notify() // news of the membership
		if took := <-done; took != 100*time.Millisecond {
			t.Errorf("the wait ended %v after it began; want 100ms, at the news", took)
		}

		done = waitEnds(f, time.Second, kick)
		time.Sleep(50 * time.Millisecond)
		kick <- struct{}{} // the member's own loop asks for a read
		if took := <-done; took != 50*time.Millisecond {
			t.Errorf("the wait ended %v after it began; want 50ms, at the kick", took)
		}

		if took := <-waitEnds(f, time.Second, kick); took != time.Second {
			t.Errorf("the wait ended after %v; want its bound, 1s", took)
		}

		// The log goes quiet: the wait ends 250 ms after the last entry
		// read, however often entries came before.
		f.read()
		quiet := make(chan time.Duration, 1)
		go func() {
			t := time.Now()
			f.wait(time.Second, 250*time.Millisecond, kick, nil)
			quiet <- time.Since(t)
		}()
		for range 3 {
			time.Sleep(100 * time.Millisecond)
			f.read() // a member read entries
		}
		if took := <-quiet; took != 550*time.Millisecond {
			t.Errorf("the wait ended %v after it began; want 550ms, 250ms after the last entry read at 300ms", took)
		}
	})
}

func TestFlowsAreSharedByScopeAndDroppedWithTheirLastMember(t *testing.T) {
	mem := memstore.New()
	a, b := faultstore.Wrap(mem), faultstore.Wrap(mem)
	if flowKey(a, "g") != flowKey(b, "g") {
		t.Errorf("handles wrapping one store have flow keys %q and %q; want one", flowKey(a, "g"), flowKey(b, "g"))
	}
	if flowKey(a, "g") == flowKey(a, "h") {
		t.Error("two groups have the same flow key")
	}
	if flowKey(mem, "g") == flowKey(memstore.New(), "g") {
		t.Error("two stores have the same flow key")
	}

	f1 := allFlows.acquire(flowKey(a, "g"))
	f2 := allFlows.acquire(flowKey(b, "g"))
	if f1 != f2 {
		t.Fatal("members of one group on one store have flows of their own")
	}
	allFlows.release(f1)
	allFlows.release(f2)
	f3 := allFlows.acquire(flowKey(a, "g"))
	defer allFlows.release(f3)
	if f3 == f1 {
		t.Error("a flow outlived its last member")
	}
}
