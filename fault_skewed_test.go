package herd_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// settleRunning waits, up to limit, until every partition runs on exactly
// one live member and nothing moved for two report intervals: the end of
// a skewed schedule's changes, which are not a count balance.
func (f *faultFleet) settleRunning(step string, limit time.Duration) {
	f.t.Helper()
	ids := f.ids()
	deadline := time.Now().Add(limit)
	stillSince := time.Now()
	last := ""
	for {
		owners := f.tr.Owners()
		ok := len(owners) == len(f.parts)
		for _, p := range f.parts {
			if m, found := owners[p]; !found || !slices.Contains(ids, m) || f.tr.Runners(p, "") != 1 {
				ok = false
			}
		}
		now := f.tr.Table(ids)
		if now != last {
			last, stillSince = now, time.Now()
		}
		if ok && time.Since(stillSince) >= 20*time.Second {
			break
		}
		if time.Now().After(deadline) {
			f.failNow("%s: partitions not all running, still, within %v:\n%s%s", step, limit, now, f.storeDump())
		}
		f.sleep(500 * time.Millisecond)
	}
	synctest.Wait()
	f.logf("%s: every partition running", step)
}

// TestFaultSkewedSchedules: the random fault schedules (pauses, cuts,
// latency, failures, crashes, leaves, joins, the store's data lost) with
// handlers of unequal loads published every 10 s, so that partitions move
// for load while the faults come: the checker's guarantees hold (one
// handler at a time outside a stall, no checkpoint accepted below another,
// fenced writes refused), and every partition runs once the faults end.
// HERD_FAULT_SEEDS=n runs seeds 1001 to 1000+n (default 8); HERD_FAULT_SEED=k
// runs seed k alone, as a failure's rerun line says.
func TestFaultSkewedSchedules(t *testing.T) {
	n := 8
	if s := os.Getenv("HERD_FAULT_SEEDS"); s != "" {
		if k, err := strconv.Atoi(s); err == nil && k > 0 {
			n = k
		}
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(1001 + i)
	}
	if s := os.Getenv("HERD_FAULT_SEED"); s != "" {
		k, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HERD_FAULT_SEED=%q: want a seed number", s)
		}
		seeds = []uint64{k}
	}
	dataLoss := os.Getenv("HERD_FAULT_DATALOSS") != "0"
	for _, seed := range seeds {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { runFaultScheduleWith(t, seed, dataLoss, true) })
		})
	}
}

// storeDump shows the store's sessions, records and loads, for a failure.
func (f *faultFleet) storeDump() string {
	snap, err := f.st.Snapshot(f.ctx, faultGroup)
	if err != nil {
		return fmt.Sprintf("store: %v\n", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "store: %d partitions (set stored: %v)\n", len(snap.Partitions), snap.PartitionSetStored)
	for _, s := range snap.Sessions {
		fmt.Fprintf(&b, "  session %s of %s\n", s.ID, s.Member)
	}
	for _, o := range snap.Owners {
		fmt.Fprintf(&b, "  record %s: session %q member %q epoch %d given back %q\n", o.Partition, o.Session, o.Member, o.Epoch, o.GivenBack)
	}
	for _, l := range snap.Loads {
		fmt.Fprintf(&b, "  load %s: %.4f\n", l.Partition, l.Load)
	}
	return b.String()
}
