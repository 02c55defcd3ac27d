package proctest

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd/internal/pgtest"
)

// testPGSigstopInTx: the fleet writes every step with InTx; c3 is stopped
// by SIGSTOP inside one, in the middle of reading a large result (its
// backend active, blocked sending, holding the partition's record lock).
// The rest of the group carries on: once c3's session has expired, the
// others take over all of its partitions, the one its transaction locked
// included (a claim ends that transaction: its session is past its fence
// time), and keep checkpointing; c3 resumes after 3 TTLs and rejoins; the
// table holds each item exactly once, and no two handlers ran a partition
// at once outside the stop.
func testPGSigstopInTx(t *testing.T) {
	const victim = "c3"
	var table string
	pf := startPGFleet(t, "sigstop-in-intx", nil, func(pf *pgFleet) []string {
		table = pgx.Identifier{pf.schema, "items"}.Sanitize()
		pgtest.Exec(t, "CREATE TABLE "+table+" (part text NOT NULL, item bigint NOT NULL)")
		return []string{envInTx + "=" + table, envInTxStall + "=" + victim}
	})
	f := pf.fleet
	f.mu.Lock()
	old := f.claimsOfLocked(victim)
	seq := len(f.events)
	f.mu.Unlock()

	f.signal(victim, syscall.SIGUSR1)
	var stalled event
	f.waitFor("c3's InTx to stall in the middle of a read", 10*time.Second, func() (bool, string) {
		for _, ev := range f.events[seq:] {
			if ev.Member == victim && ev.Ev == "stall" {
				stalled = ev
				return true, ""
			}
		}
		return false, "no stall event yet"
	})
	stopAt := time.Now()
	f.signal(victim, syscall.SIGSTOP)
	f.waitStopped(victim)
	old[stalled.Partition] = stalled.Epoch
	t.Logf("%s stopped inside InTx on partition %s (epoch %d); it ran %d partitions", victim, stalled.Partition, stalled.Epoch, len(old))

	a := newAdmin(t)
	var state, wait string
	f.waitFor("the stopped member's backend to block sending", 10*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := a.conn.QueryRow(ctx, `SELECT state, coalesce(wait_event, '') FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND datname = current_database() AND query LIKE '%generate_series(1, 2000000)%'`).Scan(&state, &wait)
		return err == nil && state == "active" && wait == "ClientWrite", fmt.Sprintf("state %q, wait %q, err %v", state, wait, err)
	})
	t.Logf("its backend: %s, waiting on %s", state, wait)

	others := without(pf.members, victim)
	f.waitFor("the others to run every partition of the stopped member", ttl+10*time.Second, func() (bool, string) {
		for p := range old {
			n := 0
			for m := range f.running[p] {
				if m != victim {
					n++
				}
			}
			if n != 1 {
				return false, fmt.Sprintf("partition %s is run by %v", p, keys(f.running[p]))
			}
		}
		return true, ""
	})
	takenAt := time.Now()
	t.Logf("the others run all %d partitions of %s %v after the SIGSTOP (the TTL is %v)", len(old), victim, time.Since(stopAt).Round(time.Millisecond), ttl)
	// The group carries on: every other member gets checkpoints accepted
	// after the takeover, the stalled partition's new owner included.
	f.waitFor("the others to checkpoint after the takeover", 10*time.Second, func() (bool, string) {
		seen := map[string]bool{}
		for _, ev := range f.events[seq:] {
			if ev.Ev == "cp_ok" && ev.T > takenAt.UnixNano() {
				seen[ev.Member] = true
				if ev.Partition == stalled.Partition {
					seen["stalled partition"] = true
				}
			}
		}
		for _, m := range append(slices.Clone(others), "stalled partition") {
			if !seen[m] {
				return false, m + " has no accepted checkpoint since"
			}
		}
		return true, ""
	})

	if d := 3*ttl - time.Since(stopAt); d > 0 {
		time.Sleep(d) // the stop lasts 3 TTLs
	}
	f.signal(victim, syscall.SIGCONT)
	d := f.waitBalanced("the resumed child to rejoin and the fleet to rebalance", pf.members, 1, 20*time.Second)
	t.Logf("after SIGCONT: balanced %v later: %v", d.Round(time.Millisecond), f.counts())
	for _, ev := range f.snapshotEvents()[seq:] {
		if ev.Member == victim && ev.Partition == stalled.Partition && ev.Epoch == stalled.Epoch && ev.Ev != "start" && ev.Ev != "stop" && ev.Ev != "stall" {
			t.Logf("the stalled InTx, resumed: %s %s", ev.Ev, ev.Err)
			if ev.Ev == "cp_ok" {
				t.Errorf("the stalled InTx on %s at epoch %d committed after its partition was taken over", ev.Partition, ev.Epoch)
			}
			break
		}
	}
	f.stopAll()
	checkItemsOnce(t, pf, table)
	checkCheckpoints(t, f.snapshotEvents())
	f.checkExclusive(func(iv interval) bool {
		return iv.member == victim && old[iv.partition] == iv.epoch // the SIGSTOP window
	})
}
