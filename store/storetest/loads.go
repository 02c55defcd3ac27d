package storetest

// Load reports (store.Store.ReportLoads): an entry of the log carrying
// partition→load, and the latest load of each partition in snapshots.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/herdhq/herd/store"
)

// report publishes loads for session, failing the test on an error.
func (e *env) report(session string, loads ...store.Load) {
	e.t.Helper()
	if err := e.s.ReportLoads(e.ctx, e.group, session, loads); err != nil {
		e.t.Fatalf("ReportLoads(%q, %v): %v; want nil", session, loads, err)
	}
}

// testLoadsReported: a report appends a LoadsReported entry naming its
// session with its loads sorted, changes no record, and sets each load as
// its partition's latest in the snapshot (a later report of a partition
// replaces its value, the others stay); the snapshot before plus the
// entries equals the snapshot after; the loads outlive the session, and a
// session that is not alive cannot report.
func testLoadsReported(e *env) {
	t := e.t
	sess := e.open("m1", longTTL)
	e.setPartitions("a", "b", "city:west=1")
	held := e.claim("a", sess)
	e.checkpoint("a", held.Epoch, "progress")
	before := e.snap()
	if len(before.Loads) != 0 {
		t.Fatalf("Snapshot before any report has loads %v; want none", before.Loads)
	}
	first := []store.Load{{Partition: "city:west=1", Load: 0.1}, {Partition: "a", Load: 1.5}, {Partition: "b", Load: 0}}
	e.report(sess, first...)
	second := []store.Load{{Partition: "a", Load: 1e-7}, {Partition: "not-in-the-set", Load: 12345.678901234567}}
	e.report(sess, second...)
	after := e.snap()
	want := []store.Load{{Partition: "a", Load: 1e-7}, {Partition: "b", Load: 0},
		{Partition: "city:west=1", Load: 0.1}, {Partition: "not-in-the-set", Load: 12345.678901234567}}
	if !slices.Equal(after.Loads, want) {
		t.Fatalf("Snapshot's loads after two reports are %v; want %v", after.Loads, want)
	}
	if after.Version.Seq != before.Version.Seq+2 {
		t.Fatalf("after 2 reports the version is %v, from %v; want one entry per report", after.Version, before.Version)
	}
	cs := e.readLog(before.Version, after.Version)
	for i, rep := range [][]store.Load{first, second} {
		c := cs[i]
		w := store.ReportChange(sess, rep)
		w.Version, w.At = c.Version, c.At
		if fmt.Sprintf("%+v", c) != fmt.Sprintf("%+v", w) {
			t.Fatalf("entry %d of the reports is %+v; want %+v", i, c, w)
		}
	}
	replay(t, before, after, cs, "load reports")
	if o := e.mustRecord("a"); o.Session != sess || o.Epoch != held.Epoch {
		t.Fatalf("after the reports the record of %q is %s; want it still held by %q at epoch %d", "a", fmtOwner(o), sess, held.Epoch)
	}
	e.checkpoint("a", held.Epoch, "still the owner")

	// The loads outlive the session; a session that ended cannot report.
	e.close(sess)
	v := e.snap().Version
	err := e.s.ReportLoads(e.ctx, e.group, sess, []store.Load{{Partition: "a", Load: 9}})
	if !errors.Is(err, store.ErrSessionExpired) {
		t.Fatalf("ReportLoads by a closed session: %v; want ErrSessionExpired", err)
	}
	s := e.snap()
	if s.Version != v || !slices.Equal(s.Loads, want) {
		t.Fatalf("after a refused report: version %v, loads %v; want %v and %v (nothing written)", s.Version, s.Loads, v, want)
	}
}

// testLoadsLarge: a report of MaxLoads loads is taken whole (a backend may
// split it into several entries), and the log replays to the snapshot.
func testLoadsLarge(e *env) {
	t := e.t
	sess := e.open("m1", longTTL)
	before := e.snap()
	loads := make([]store.Load, store.MaxLoads)
	for i := range loads {
		loads[i] = store.Load{Partition: fmt.Sprintf("partition-%05d", i), Load: float64(i) / 7}
	}
	e.report(sess, loads...)
	after := e.snap()
	if !slices.Equal(after.Loads, loads) {
		t.Fatalf("Snapshot after a report of %d loads has %d loads; want them all, as reported", len(loads), len(after.Loads))
	}
	cs := e.readLog(before.Version, after.Version)
	n := 0
	for _, c := range cs {
		if c.Kind != store.LoadsReported || c.Session != sess {
			t.Fatalf("entry %+v after a report; want LoadsReported entries of session %q only", c, sess)
		}
		n += len(c.Loads)
	}
	if n != len(loads) {
		t.Fatalf("the report's %d entries carry %d loads; want %d", len(cs), n, len(loads))
	}
	replay(t, before, after, cs, "a large load report")
}

// testLoadsWakeChanges: a reader waiting at the end of the log gets a
// report's entry as it gets any other: members learn loads by following
// the log, with no read of their own.
func testLoadsWakeChanges(e *env) {
	t := e.t
	sess := e.open("m", longTTL)
	v := e.snap().Version
	got := waitingReader(e, v)
	e.report(sess, store.Load{Partition: "k", Load: 3})
	select {
	case r := <-got:
		if r.err != nil || len(r.cs) != 1 || r.cs[0].Kind != store.LoadsReported || !slices.Equal(r.cs[0].Loads, []store.Load{{Partition: "k", Load: 3}}) {
			t.Fatalf("Changes woken by ReportLoads returned %+v, %v; want the one LoadsReported entry", r.cs, r.err)
		}
	case <-time.After(eventWait):
		t.Fatalf("Changes did not return within %v of ReportLoads", eventWait)
	}
}

// testLoadsInvalid: no loads, too many, a partition twice, a load that is
// negative, not a number or infinite, a malformed id: ErrInvalid, and
// nothing is logged.
func testLoadsInvalid(e *env) {
	t := e.t
	sess := e.open("m", longTTL)
	v := e.snap().Version
	many := make([]store.Load, store.MaxLoads+1)
	for i := range many {
		many[i] = store.Load{Partition: fmt.Sprint(i), Load: 1}
	}
	bad := map[string][]store.Load{
		"no loads":      nil,
		"too many":      many,
		"twice":         {{Partition: "a", Load: 1}, {Partition: "a", Load: 2}},
		"negative":      {{Partition: "a", Load: -1}},
		"NaN":           {{Partition: "a", Load: math.NaN()}},
		"infinite":      {{Partition: "a", Load: math.Inf(1)}},
		"malformed id":  {{Partition: "bad\nid", Load: 1}},
		"empty id":      {{Partition: "", Load: 1}},
		"above MaxLoad": {{Partition: "a", Load: store.MaxLoad * 2}},
	}
	for name, loads := range bad {
		if err := e.s.ReportLoads(e.ctx, e.group, sess, loads); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("ReportLoads(%s): %v; want ErrInvalid", name, err)
		}
	}
	one := []store.Load{{Partition: "a", Load: 1}}
	if err := e.s.ReportLoads(e.ctx, e.group, "", one); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("ReportLoads by session \"\": %v; want ErrInvalid", err)
	}
	if err := e.s.ReportLoads(e.ctx, "", sess, one); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("ReportLoads in group \"\": %v; want ErrInvalid", err)
	}
	if got := e.snap(); got.Version != v || len(got.Loads) != 0 {
		t.Fatalf("after rejected reports the version is %v and the loads %v; want %v and none (nothing logged)", got.Version, got.Loads, v)
	}
}
