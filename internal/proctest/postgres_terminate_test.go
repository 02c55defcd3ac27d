package proctest

// A PostgreSQL backend terminated under a member; checkpoints and items processed once.

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testPGTerminate: the server terminates every connection of c2 (its
// pool's and its LISTEN connection) every 250ms for 2 TTLs. The member
// reconnects, keeps or regains its partitions, never two handlers run one
// partition at once, no checkpoint goes backwards or is accepted from a
// superseded epoch, the fleet is balanced again within 10 s of the last
// termination, c2 LISTENs again, and when a fifth member joins it sees it
// and gives it partitions within 5 s.
func testPGTerminate(t *testing.T) {
	pf := startPGFleet(t, "terminate", nil, nil)
	f := pf.fleet
	a := newAdmin(t)
	victim := "c2"
	app := pf.appName(victim)
	listenPID := a.waitListening(app, 10*time.Second, nil)
	f.mu.Lock()
	before := len(f.claimsOfLocked(victim))
	seq := len(f.events)
	f.mu.Unlock()

	var rounds, listens int
	ended := map[int32]bool{}
	var lastAt time.Time // the last round
	begin := time.Now()
	tick := time.NewTicker(terminateEvery)
	for {
		bs := a.terminate(app)
		lastAt = time.Now()
		rounds++
		for _, b := range bs {
			ended[b.pid] = true
			if b.listen {
				listens++
			}
		}
		if lastAt.Sub(begin) >= terminateFor {
			break
		}
		<-tick.C
	}
	tick.Stop()
	t.Logf("terminated %d connections of %s (%d of them its LISTEN connection) in %d rounds over %v",
		len(ended), victim, listens, rounds, lastAt.Sub(begin).Round(time.Millisecond))
	if listens == 0 {
		t.Errorf("the LISTEN connection of %s (pid %d before) was never terminated; the test did not exercise it", victim, listenPID)
	}

	pid := a.waitListening(app, terminateRecover, ended)
	t.Logf("%s LISTENs again (pid %d, was %d) %v after the last termination", victim, pid, listenPID, time.Since(lastAt).Round(time.Millisecond))
	f.waitBalanced("the fleet to be balanced after the terminations", pf.members, 1, max(terminateRecover-time.Since(lastAt), time.Second))
	d := time.Since(lastAt)
	t.Logf("after the last termination: balanced %v later: %v", d.Round(time.Millisecond), f.counts())
	if d > terminateRecover {
		t.Errorf("the fleet was balanced %v after the last termination; want within %v", d, terminateRecover)
	}

	var stops, starts, failed, taken int
	var sample string
	lastOK := map[string]int64{} // partition -> the victim's last accepted checkpoint
	var gaps []time.Duration     // per partition of the victim: the longest time without one
	longest := map[string]time.Duration{}
	for _, ev := range f.snapshotEvents()[seq:] {
		switch {
		case ev.Member != victim:
			if ev.Ev == "start" {
				taken++ // in a balanced fleet, only the victim's partitions move
			}
		case ev.Ev == "stop":
			stops++
		case ev.Ev == "start":
			starts++
		case ev.Ev == "cp_ok":
			if prev, ok := lastOK[ev.Partition]; ok {
				longest[ev.Partition] = max(longest[ev.Partition], time.Duration(ev.T-prev))
			}
			lastOK[ev.Partition] = ev.T
		case strings.HasPrefix(ev.Ev, "cp_"):
			failed++
			if sample == "" {
				sample = ev.Ev + ": " + ev.Err
			}
		}
	}
	for _, d := range longest {
		gaps = append(gaps, d)
	}
	t.Logf("%s ran %d partitions before; since the first termination it stopped %d handlers and started %d, and the others started %d partitions",
		victim, before, stops, starts, taken)
	t.Logf("%d of its checkpoints failed (e.g. %s); the longest time a partition of %s went without an accepted checkpoint, per partition: %s",
		failed, sample, victim, stats(gaps))

	// A fifth member joins: c2 must see it through its log (the LISTEN
	// connection it made again, or polling while it has none) and give it
	// partitions long before the backstop read.
	joinAt := time.Now()
	f.start("c4", pf.url("c4"))
	all := append(slices.Clone(pf.members), "c4")
	d = f.waitBalanced("the fleet to take in a fifth member", all, 1, joinSeen+5*time.Second)
	var gave time.Duration
	for _, ev := range f.snapshotEvents() {
		if ev.Member == victim && ev.Ev == "stop" && ev.T > joinAt.UnixNano() {
			gave = time.Unix(0, ev.T).Sub(joinAt)
			break
		}
	}
	t.Logf("c4 joined: %s gave up its first partition %v after the start of c4, the fleet of 5 balanced %v after it: %v",
		victim, gave.Round(time.Millisecond), d.Round(time.Millisecond), f.counts())
	if gave == 0 || gave > joinSeen {
		t.Errorf("%s gave up its first partition to the new member %v after it started; want within %v", victim, gave, joinSeen)
	}

	f.stopAll()
	checkCheckpoints(t, f.snapshotEvents())
	f.checkExclusive(nil)
}

// checkCheckpoints checks, by the children's timestamps, that every
// handler started from at least the last checkpoint accepted for its
// partition before, and that no checkpoint was accepted at an epoch after
// a higher epoch of the partition had started.
func checkCheckpoints(t *testing.T, evs []event) {
	t.Helper()
	byPart := map[string][]event{}
	for _, ev := range evs {
		if ev.Ev == "start" || ev.Ev == "cp_ok" {
			byPart[ev.Partition] = append(byPart[ev.Partition], ev)
		}
	}
	bad, starts := 0, 0
	for p, es := range byPart {
		sort.SliceStable(es, func(i, j int) bool { return es[i].T < es[j].T })
		var lastOK, maxStarted uint64
		for _, ev := range es {
			switch ev.Ev {
			case "start":
				starts++
				if ev.Value < lastOK {
					bad++
					t.Errorf("partition %s: %s started it (epoch %d) at %s from checkpoint %d; %d had been accepted", p, ev.Member, ev.Epoch, ts(ev.T), ev.Value, lastOK)
				}
				maxStarted = max(maxStarted, ev.Epoch)
			case "cp_ok":
				// The write began before any later start can have
				// superseded it only if Sent precedes that start; a write
				// sent after a higher epoch started must be refused.
				lastOK = max(lastOK, ev.Value)
				if ev.Epoch < maxStarted && ev.Sent > startOf(es, maxStarted) {
					bad++
					t.Errorf("partition %s: checkpoint %d at epoch %d, sent at %s, was accepted after epoch %d started", p, ev.Value, ev.Epoch, ts(ev.Sent), maxStarted)
				}
			}
		}
	}
	if bad == 0 {
		t.Logf("checkpoints: %d handler starts checked, none from before a checkpoint accepted earlier, none accepted at a superseded epoch", starts)
	}
}

// startOf is the time of the start event at epoch in es.
func startOf(es []event, epoch uint64) int64 {
	for _, ev := range es {
		if ev.Ev == "start" && ev.Epoch == epoch {
			return ev.T
		}
	}
	return 0
}

// checkItemsOnce reads, in one snapshot of the database, the fleet's
// checkpoints and the items its handlers wrote with InTx, and requires each
// partition's items to be 1 to its checkpoint, each exactly once: no item
// lost, none written twice, nothing written by a member that had lost the
// partition (whose items would repeat its successor's).
func checkItemsOnce(t *testing.T, pf *pgFleet, table string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := pf.st.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	S := pgx.Identifier{pf.schema}.Sanitize()
	rows, err := tx.Query(ctx, `SELECT o.partition, o.checkpoint FROM `+S+`.owners o JOIN `+S+`.groups g ON g.gid = o.gid WHERE g.name = $1`, pf.group)
	if err != nil {
		t.Fatal(err)
	}
	checkpoint := map[string]uint64{}
	for rows.Next() {
		var p string
		var cp []byte
		if err := rows.Scan(&p, &cp); err != nil {
			t.Fatal(err)
		}
		checkpoint[p] = decode(cp)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	type items struct{ n, distinct, lo, hi int64 }
	got := map[string]items{}
	rows, err = tx.Query(ctx, `SELECT part, count(*), count(DISTINCT item), min(item), max(item) FROM `+table+` GROUP BY part`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p string
		var it items
		if err := rows.Scan(&p, &it.n, &it.distinct, &it.lo, &it.hi); err != nil {
			t.Fatal(err)
		}
		got[p] = it
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var total int64
	for p, cp := range checkpoint {
		it := got[p]
		total += it.n
		want := items{n: int64(cp), distinct: int64(cp), lo: min(1, int64(cp)), hi: int64(cp)}
		if it != want {
			t.Errorf("partition %s: checkpoint %d, items %d (%d distinct, %d to %d); want each of 1 to %d once", p, cp, it.n, it.distinct, it.lo, it.hi, cp)
		}
		delete(got, p)
	}
	for p, it := range got {
		t.Errorf("partition %s has %d items and no record", p, it.n)
	}
	if total == 0 {
		t.Fatal("the handlers wrote no item")
	}
	t.Logf("%d items in %d partitions, each written once", total, len(checkpoint))
}
