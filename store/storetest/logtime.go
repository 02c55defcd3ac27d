package storetest

import (
	"time"

	"github.com/herdhq/herd/store"
)

// clockSkew is how far the store's clock (the server's, or the writing
// process's) may be from the suite's when comparing Change.At with the
// time of the write: the servers the suite runs against share the host's
// clock, and times are kept to the microsecond.
const clockSkew = 500 * time.Millisecond

// testLogTime: every kind of entry carries the time it was appended
// (Change.At): within the call that appended it, give or take clockSkew;
// the entries of one call that batches several share one time; and the
// times do not go back along the log of a single writer.
func testLogTime(e *env) {
	t := e.t
	e.setPartitions("z") // a log to read on from (a zero version cannot follow a written log)
	v := e.snap().Version
	var all []store.Change
	kinds := map[store.ChangeKind]bool{}
	// step runs what, then checks the entries it appended against the
	// time it took. what returns nothing; its entries are read from the
	// log up to the snapshot's version after it.
	step := func(name string, what func()) []store.Change {
		t.Helper()
		begin := time.Now()
		what()
		end := time.Now()
		next := e.snap().Version
		cs := e.readLog(v, next)
		if len(cs) == 0 {
			t.Fatalf("%s appended no entry to the log", name)
		}
		for _, c := range cs {
			switch {
			case c.At.IsZero():
				t.Fatalf("%s: entry %v (%v) has no time (At is zero); want when it was appended", name, c.Version, c.Kind)
			case c.At.Before(begin.Add(-clockSkew)) || c.At.After(end.Add(clockSkew)):
				t.Fatalf("%s: entry %v (%v) has At %v, outside the call [%v, %v] give or take %v",
					name, c.Version, c.Kind, c.At, begin, end, clockSkew)
			}
			kinds[c.Kind] = true
		}
		all, v = append(all, cs...), next
		return cs
	}
	step("SetPartitions", func() { e.setPartitions("a", "b", "c") })
	var a string
	step("OpenSession", func() { a = e.open("m1", longTTL) })
	batch := step("ClaimBatch", func() {
		if _, err := e.s.ClaimBatch(e.ctx, e.group, a, []string{"a", "b"}); err != nil {
			t.Fatalf("ClaimBatch(a, b): %v", err)
		}
	})
	if len(batch) != 2 || !batch[0].At.Equal(batch[1].At) {
		t.Fatalf("the entries of one ClaimBatch are %+v; want two with the same At", batch)
	}
	step("Release", func() { e.release("a", a, e.mustRecord("a").Epoch) })
	step("GiveBack", func() {
		if err := e.s.GiveBack(e.ctx, e.group, "b", a, e.mustRecord("b").Epoch); err != nil {
			t.Fatalf("GiveBack(b): %v", err)
		}
	})
	step("Restore", func() {
		if err := e.s.Restore(e.ctx, e.group, "c", 5, []byte("x")); err != nil {
			t.Fatalf("Restore(c): %v", err)
		}
	})
	step("Request", func() {
		if err := e.s.Request(e.ctx, e.group, store.Request{Action: store.RequestRun, Partition: "a"}); err != nil {
			t.Fatalf("Request: %v", err)
		}
	})
	step("CloseSession", func() { e.close(a) })
	step("a session expiring", func() {
		b := e.open("m2", shortTTL)
		e.waitGone(b, shortTTL+expiryGrace+e.opts.ExpiryLag)
		if _, err := e.s.ExpireSessions(e.ctx, e.group); err != nil {
			t.Fatalf("ExpireSessions: %v", err)
		}
	})
	for _, k := range []store.ChangeKind{store.PartitionsSet, store.SessionOpened, store.Claimed, store.Released,
		store.Restored, store.Requested, store.SessionClosed, store.SessionExpired} {
		if !kinds[k] {
			t.Fatalf("the steps logged no %v entry; want one of every kind", k)
		}
	}
	for i := 1; i < len(all); i++ {
		if all[i].At.Before(all[i-1].At) {
			t.Fatalf("entry %v has At %v, before %v of the entry before it (one writer)", all[i].Version, all[i].At, all[i-1].At)
		}
	}
}
