package herd_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/herdtest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// TestDataLossLoadsPublishedAgain: the store loses its data, the loads
// the members had published with it. A member that lost its session
// publishes again the loads of its partitions as its new session opens,
// before the hold after the loss ends, so that the fleet places the
// partitions by load at once rather than by count, then again by load
// once they have run a report interval (seeds 1022, 1030 and 1057 of
// TestFaultSkewedSchedules at 64 seeds: a move 20 s after the faults
// ended).
func TestDataLossLoadsPublishedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := memstore.New()
		m, err := herd.Join(ctx, st, herd.Config{
			Group: "g", Member: "m1", Partitions: herd.Numbered(4), LoadReportInterval: 10 * time.Second,
			Logger: slog.New(slog.DiscardHandler),
			Handler: func(c *herd.Claim) error {
				i, _ := strconv.Atoi(c.Partition)
				c.ReportLoad(float64(i + 1))
				<-c.Context().Done()
				return nil
			},
		})
		if err != nil {
			t.Fatalf("join: %v", err)
		}
		defer func() { cancel(); <-m.Done() }()
		time.Sleep(22 * time.Second) // virtual: loads published at 10 s and 20 s
		if snap, err := st.Snapshot(ctx, "g"); err != nil || len(snap.Loads) != 4 {
			t.Fatalf("before the loss: loads %v (err %v), want 4", snap.Loads, err)
		}
		st.Wipe()
		// The next report is at 30 s, and the partitions are held until
		// SessionTTL after the new session opened: only loads published
		// again show by 29 s.
		time.Sleep(7 * time.Second)
		snap, err := st.Snapshot(ctx, "g")
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		for i := range 4 {
			p := strconv.Itoa(i)
			if l, ok := snap.LoadOf(p); !ok || l != float64(i+1) {
				t.Errorf("partition %s after the loss: load %v (published: %v), want %d", p, l, ok, i+1)
			}
		}
	})
}

// TestDataLossLoadsPublishedOnceSeen: a member cut off from the store as
// it loses its data fences itself (its session is not known to have
// expired), and opens its next session while its restores still time
// out: nothing shows it yet that the store lost its data. When a restore
// does write, the loads it kept are published again then, before the
// hold after the loss ends; dropped, the fleet placed the member's
// partitions by count, then moved them for load over two report
// intervals (HERD_FAULT_SEED=1072 of TestFaultSkewedSchedules, 40 s
// without a still minute after the faults ended).
func TestDataLossLoadsPublishedOnceSeen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := memstore.New()
		fs := faultstore.Wrap(st)
		m, err := herd.Join(ctx, fs, herd.Config{
			Group: "g", Member: "m1", Partitions: herd.Numbered(4), LoadReportInterval: 10 * time.Second,
			Logger: slog.New(slog.DiscardHandler),
			Handler: func(c *herd.Claim) error {
				i, _ := strconv.Atoi(c.Partition)
				c.ReportLoad(float64(i + 1))
				_ = c.Checkpoint(c.Context(), []byte{1}) // something to restore
				<-c.Context().Done()
				return nil
			},
		})
		if err != nil {
			t.Fatalf("join: %v", err)
		}
		defer func() { cancel(); fs.SetCut(false); fs.SetLatency(0); <-m.Done() }()
		time.Sleep(22 * time.Second) // virtual: loads published at 10 s and 20 s
		if snap, err := st.Snapshot(ctx, "g"); err != nil || len(snap.Loads) != 4 {
			t.Fatalf("before the loss: loads %v (err %v), want 4", snap.Loads, err)
		}
		fs.SetCut(true)
		time.Sleep(10 * time.Second) // the member fences itself
		st.Wipe()
		// Slow enough that a restore times out (the first after a read of
		// RenewTimeout/8), fast enough that the session opens.
		fs.SetLatency(3100 * time.Millisecond)
		fs.SetCut(false)
		for {
			if snap, err := st.Snapshot(ctx, "g"); err == nil && len(snap.Sessions) > 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		fs.SetLatency(0)
		// The restores write within a RenewTimeout or two; the hold after
		// the loss lasts SessionTTL from then, and only then do the
		// handlers run and measure.
		time.Sleep(8 * time.Second)
		snap, err := st.Snapshot(ctx, "g")
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		if len(snap.Owners) == 0 {
			t.Fatalf("no restore written: the scenario did not happen")
		}
		for _, o := range snap.Owners {
			if o.Session != "" {
				t.Fatalf("partition %s claimed during the hold: the scenario did not happen", o.Partition)
			}
		}
		for i := range 4 {
			p := strconv.Itoa(i)
			if l, ok := snap.LoadOf(p); !ok || l != float64(i+1) {
				t.Errorf("partition %s after the loss: load %v (published: %v), want %d", p, l, ok, i+1)
			}
		}
	})
}

// TestDataLossFreeLoadsPublishedAgain: the store loses its data right
// after partitions are handed off, not claimed yet (their next owner is
// stalled). No owner publishes their loads again, and the member that
// lost its session has already read the emptied store anew when it
// notices: it publishes again the loads its copy showed of them as the
// log went gone, although the copy had not applied the releases' entries
// yet and showed them its own (HERD_FAULT_SEED=1057 of
// TestFaultSkewedSchedules).
func TestDataLossFreeLoadsPublishedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := memstore.New()
		cfg := herd.Config{
			Group: "g", Member: "m1", Partitions: herd.Numbered(4), LoadReportInterval: 10 * time.Second,
			Logger: slog.New(slog.DiscardHandler),
			Handler: func(c *herd.Claim) error {
				i, _ := strconv.Atoi(c.Partition)
				c.ReportLoad(float64(i + 1))
				_ = c.Checkpoint(c.Context(), []byte{1}) // something to restore
				<-c.Context().Done()
				return nil
			},
		}
		m1, err := herd.Join(ctx, st, cfg)
		if err != nil {
			t.Fatalf("join m1: %v", err)
		}
		defer func() { cancel(); <-m1.Done() }()
		waitLoads(t, st, 4, 30*time.Second) // published at 10 s
		gate := &herdtest.Gate{}
		cfg.Member = "m2"
		herdtest.WithGate(&cfg, gate)
		m2, err := herd.Join(ctx, st, cfg)
		if err != nil {
			t.Fatalf("join m2: %v", err)
		}
		gate.Pause() // stalled before it claims anything
		defer func() { gate.Resume(); cancel(); <-m2.Done() }()
		// Wipe as soon as m1 has handed a partition off to m2 (released,
		// not claimed) with every load published.
		var free []string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			snap, err := st.Snapshot(ctx, "g")
			if err != nil {
				t.Fatalf("snapshot: %v", err)
			}
			free = free[:0]
			for _, o := range snap.Owners {
				if o.Session == "" {
					free = append(free, o.Partition)
				}
			}
			if len(free) > 0 && len(snap.Loads) == 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("before the loss: free %v, loads %v: the scenario did not happen", free, snap.Loads)
			}
		}
		st.Wipe()
		// m1 renews, finds its session gone, opens another and publishes
		// the loads again; the partitions are held until SessionTTL after
		// it opened, and their next report is 10 s after that at least:
		// only loads published again show within 8 s.
		var snap *store.Snapshot
		for deadline := time.Now().Add(8 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var err error
			if snap, err = st.Snapshot(ctx, "g"); err != nil {
				t.Fatalf("snapshot: %v", err)
			}
			if len(snap.Loads) == 4 || time.Now().After(deadline) {
				break
			}
		}
		for _, p := range free {
			i, _ := strconv.Atoi(p)
			if l, ok := snap.LoadOf(p); !ok || l != float64(i+1) {
				t.Errorf("partition %s, free at the loss: load %v (published: %v), want %d", p, l, ok, i+1)
			}
		}
	})
}

// waitLoads waits, in virtual time, until st shows the loads of partitions
// 0 to n-1 of group g as the handlers of these tests report them (i+1), at
// most d.
func waitLoads(t *testing.T, st *memstore.Store, n int, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		snap, err := st.Snapshot(t.Context(), "g")
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		all := true
		for i := range n {
			l, ok := snap.LoadOf(strconv.Itoa(i))
			all = all && ok && l == float64(i+1)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("loads %v after %v, want those of %d partitions", snap.Loads, d, n)
		}
	}
}
