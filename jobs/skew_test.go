package jobs_test

import (
	"encoding/json"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
)

// writeRecord stores rec as key's record, through a session and claim of
// its own (as a member that then left would), before any member runs.
func writeRecord(t *testing.T, f *fleet, key string, rec jobs.Record) {
	t.Helper()
	ctx := f.ctx
	sess, err := f.st.OpenSession(ctx, f.group, "writer", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	own, err := store.Claim(ctx, f.st, f.group, key, sess)
	if err != nil {
		t.Fatal(err)
	}
	rec.V, rec.Owner, rec.Epoch = jobs.RecordVersion, "writer", own.Epoch
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.Checkpoint(ctx, f.group, key, own.Epoch, b); err != nil {
		t.Fatal(err)
	}
	if err := store.Release(ctx, f.st, f.group, key, sess, own.Epoch); err != nil {
		t.Fatal(err)
	}
	if err := f.st.CloseSession(ctx, f.group, sess); err != nil {
		t.Fatal(err)
	}
}

// Records written by a member whose clock was 7 days ahead (one ended, one
// "running") do not silence their keys: due every minute, each runs about
// 60 times in an hour on the owner's clock; the skew is logged once per key
// and counted.
func TestSkewedRecordDoesNotSilenceTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		logs := newLogCounter()
		reg := prometheus.NewRegistry()
		f := newFleet(t, ctx, jobs.Config{Every: time.Minute, NoSpread: true, Logger: slog.New(logs), Metrics: reg})
		ks := []string{"ended", "running"}
		if _, err := f.st.SetPartitions(ctx, f.group, store.PartitionSet{Partitions: partitionsOf(ks)}); err != nil {
			t.Fatal(err)
		}
		ahead := time.Now().Add(7 * 24 * time.Hour).Truncate(time.Minute)
		writeRecord(t, f, "ended", jobs.Record{Slot: ahead, Attempt: 1, LastStart: ahead, LastStop: ahead.Add(time.Second),
			Result: jobs.ResultOK, Runs: 5, NextDue: ahead.Add(time.Minute)})
		writeRecord(t, f, "running", jobs.Record{Running: true, Slot: ahead, Attempt: 1, LastStart: ahead})
		began := time.Now()
		f.start(1, nil)
		time.Sleep(time.Hour)
		skewed, _ := value(t, reg, "herd_jobs_skewed_records_total", "m1")
		f.leaveAll()
		f.noOverlaps()
		runs := map[string]int{}
		for _, e := range f.events() {
			if e.start.After(began) && e.run.Slot.Before(began.Add(time.Hour)) {
				runs[e.run.Key]++
			}
		}
		for _, k := range ks {
			if runs[k] < 59 {
				t.Errorf("key %s ran %d times in an hour; want about 60 (its record's slot is 7 days ahead)", k, runs[k])
			}
		}
		if n := logs.n("the key's record is ahead of this member's clock (its writer's clock was ahead): scheduling the key from this member's clock"); n != len(ks) {
			t.Errorf("skew logged %d times; want once per key (%d)", n, len(ks))
		}
		if skewed != float64(len(ks)) {
			t.Errorf("herd_jobs_skewed_records_total = %v; want %d", skewed, len(ks))
		}
	})
}
