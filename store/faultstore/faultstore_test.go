package faultstore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestConformance: with no fault set, the wrapper keeps the whole contract.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		inner := memstore.New()
		t.Cleanup(func() { inner.Close() })
		return faultstore.Wrap(inner)
	})
}

// everyCall calls every method once and returns their errors.
func everyCall(ctx context.Context, s store.Store, session string) map[string]error {
	errs := map[string]error{}
	_, errs["OpenSession"] = s.OpenSession(ctx, "g", "m", 1, time.Minute)
	errs["KeepAlive"] = keepErr(s.KeepAlive(ctx, "g", session, time.Minute))
	_, errs["SetPartitions"] = s.SetPartitions(ctx, "g", store.PartitionSet{Partitions: []store.Partition{{ID: "x"}}})
	_, errs["Snapshot"] = s.Snapshot(ctx, "g")
	_, errs["Claim"] = store.Claim(ctx, s, "g", "p", session)
	errs["Checkpoint"] = s.Checkpoint(ctx, "g", "p", 1, []byte("x"))
	errs["Release"] = store.Release(ctx, s, "g", "p", session, 1)
	errs["GiveBack"] = s.GiveBack(ctx, "g", "p", session, 1)
	errs["CloseSession"] = s.CloseSession(ctx, "g", session)
	// The group has a log by now: the zero version is gone at once.
	_, _, errs["Changes"] = s.Changes(ctx, "g", store.Version{}, 10)
	_, errs["ExpireSessions"] = s.ExpireSessions(ctx, "g")
	_, errs["ClaimBatch"] = s.ClaimBatch(ctx, "g", session, []string{"q"})
	_, errs["ReleaseBatch"] = s.ReleaseBatch(ctx, "g", session, []store.Ownership{{Partition: "q", Epoch: 1}})
	return errs
}

// TestCut: while cut, calls fail with ErrUnavailable without reaching the
// inner store; afterwards they reach it again.
func TestCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		inner := memstore.New()
		fs := faultstore.Wrap(inner)
		a, err := fs.OpenSession(ctx, "g", "a", 1, time.Hour)
		if err != nil {
			t.Fatal(err)
		}

		fs.SetCut(true)
		before := fs.Ops()
		for name, err := range everyCall(ctx, fs, a) {
			if !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("%s while cut: %v; want ErrUnavailable", name, err)
			}
		}
		after := fs.Ops()
		if after.Reads-before.Reads != 1 || after.Feeds-before.Feeds != 1 || after.Writes-before.Writes != 11 || after.Failed-before.Failed != 13 {
			t.Errorf("counts went from %+v to %+v; want +1 read, +1 feed, +11 writes, +13 failed", before, after)
		}
		// Nothing reached the inner store: a is alive, alone, owns nothing.
		snap, err := inner.Snapshot(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Sessions) != 1 || !snap.Alive(a) || len(snap.Owners) != 0 || len(snap.Partitions) != 0 {
			t.Fatalf("inner store changed during the cut: %+v", snap)
		}

		fs.SetCut(false)
		if err := fs.CloseSession(ctx, "g", a); err != nil {
			t.Fatalf("CloseSession after the cut: %v", err)
		}
		if snap, err := inner.Snapshot(ctx, "g"); err != nil || len(snap.Sessions) != 0 {
			t.Fatalf("after the cut, CloseSession did not reach the inner store: %+v, %v", snap, err)
		}
	})
}

// TestCutRespectsContext: a cancelled call reports its ctx error.
func TestCutRespectsContext(t *testing.T) {
	fs := faultstore.Wrap(memstore.New())
	fs.SetCut(true)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := fs.Snapshot(ctx, "g"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Snapshot with a cancelled ctx while cut: %v; want context.Canceled", err)
	}
}

// TestLatency: every call takes the latency in virtual time, and a ctx
// that ends first stops the call before it reaches the inner store.
func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		inner := memstore.New()
		fs := faultstore.Wrap(inner)
		fs.SetLatency(2 * time.Second)
		start := time.Now()
		if _, err := fs.OpenSession(ctx, "g", "a", 1, time.Hour); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 2*time.Second {
			t.Fatalf("OpenSession took %v; want the latency of 2s", took)
		}
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		start = time.Now()
		_, err := fs.OpenSession(short, "g", "b", 1, time.Hour)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("OpenSession with a 500ms deadline and 2s latency: %v; want DeadlineExceeded", err)
		}
		if took := time.Since(start); took != 500*time.Millisecond {
			t.Fatalf("the call returned after %v; want 500ms, when its ctx ended", took)
		}
		snap, err := inner.Snapshot(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Sessions) != 1 {
			t.Fatalf("inner store has %d sessions; want 1 (the timed-out call must not reach it)", len(snap.Sessions))
		}
		fs.SetLatency(0)
		start = time.Now()
		if _, err := fs.Snapshot(ctx, "g"); err != nil || time.Since(start) != 0 {
			t.Fatalf("Snapshot without latency: %v after %v; want nil at once", err, time.Since(start))
		}
	})
}

// TestFailureRate: failures happen at the set rate, half of them after the
// inner store applied the call; the same seed gives the same failures.
func TestFailureRate(t *testing.T) {
	ctx := t.Context()
	inner := memstore.New()
	fs := faultstore.Wrap(inner, faultstore.WithSeed(42))
	fs.SetFailureRate(1)
	const n = 400
	for range n {
		if _, err := fs.OpenSession(ctx, "g", "m", 1, time.Hour); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("OpenSession with failure rate 1: %v; want ErrUnavailable", err)
		}
	}
	snap, err := inner.Snapshot(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	// About half the failures are lost replies: the session was opened.
	if got := len(snap.Sessions); got < n/4 || got > 3*n/4 {
		t.Fatalf("%d of %d failed OpenSession calls reached the inner store; want about half", got, n)
	}
	if c := fs.Ops(); c.Writes != n || c.Failed != n {
		t.Fatalf("counts %+v; want %d writes, all failed", c, n)
	}

	outcomes := func(seed uint64) []bool {
		fs := faultstore.Wrap(inner, faultstore.WithSeed(seed))
		fs.SetFailureRate(0.3)
		var failed []bool
		for range 2000 {
			_, err := fs.Snapshot(ctx, "g")
			if err != nil && !errors.Is(err, store.ErrUnavailable) {
				t.Fatal(err)
			}
			failed = append(failed, err != nil)
		}
		return failed
	}
	a, b := outcomes(7), outcomes(7)
	nFailed := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("call %d failed in one run and not in the other with the same seed", i)
		}
		if a[i] {
			nFailed++
		}
	}
	if nFailed < 500 || nFailed > 700 {
		t.Fatalf("%d of 2000 calls failed at rate 0.3; want about 600", nFailed)
	}
	fs.SetFailureRate(0)
	if _, err := fs.Snapshot(ctx, "g"); err != nil {
		t.Fatalf("Snapshot at failure rate 0: %v", err)
	}
}

// TestCounts: reads, feeds and writes are counted apart.
func TestCounts(t *testing.T) {
	ctx := t.Context()
	fs := faultstore.Wrap(memstore.New())
	errs := everyCall(ctx, fs, "no-such-session")
	_ = errs
	for range 3 {
		if _, err := fs.Snapshot(ctx, "g"); err != nil {
			t.Fatal(err)
		}
	}
	c := fs.Ops()
	c.Rows = 0 // TestCountsRows
	if c != (faultstore.Counts{Reads: 4, Feeds: 1, Writes: 11, Checkpoints: 1}) {
		t.Fatalf("counts %+v; want 4 reads, 1 feed and 11 writes (1 a checkpoint), none failed", c)
	}
}

// TestCountsRows: the records returned by Snapshot and the entries returned
// by Changes are counted.
func TestCountsRows(t *testing.T) {
	ctx := t.Context()
	fs := faultstore.Wrap(memstore.New())
	if _, err := fs.SetPartitions(ctx, "g", store.PartitionSet{Partitions: []store.Partition{{ID: "a"}, {ID: "b"}, {ID: "c"}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := fs.OpenSession(ctx, "g", "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, fs, "g", "a", sess); err != nil {
		t.Fatal(err)
	}
	snap, err := fs.Snapshot(ctx, "g") // 1 session, 3 partitions, 1 owner
	if err != nil {
		t.Fatal(err)
	}
	if got := fs.Ops().Rows; got != 5 {
		t.Fatalf("rows after a snapshot of 1 session, 3 partitions and 1 record: %d, want 5", got)
	}
	if _, err := store.Claim(ctx, fs, "g", "b", sess); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fs.Changes(ctx, "g", snap.Version, 10); err != nil {
		t.Fatal(err)
	}
	if got := fs.Ops().Rows; got != 6 {
		t.Fatalf("rows after one log entry more: %d, want 6", got)
	}
}

func keepErr(_ time.Duration, err error) error { return err }
