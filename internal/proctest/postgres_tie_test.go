package proctest

// Sessions tied to a connection (herd.Config.TieSession, docs/takeover.md)
// on PostgreSQL: kill -9 is taken over in well under the TTL; the server
// ending a live member's tied connection fences it before anyone runs its
// partitions; members that live keep their sessions.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd/internal/pgtest"
	"github.com/herdhq/herd/store/pgstore"
)

const (
	tieFleetTTL   = 10 * time.Second
	tiePartitions = 16
	tieKills      = 5  // kill -9 rounds
	tieTerminates = 20 // pg_terminate_backend rounds
	// tieQuiet is how long a balanced tied fleet is watched for a false
	// takeover: more than two rounds of the watch statement (2 s each).
	tieQuiet = 5 * time.Second
	// envTieDebug, set, logs the group's log after a kill -9 round
	// slower than 1 s.
	envTieDebug = "HERD_PROCTEST_TIE_DEBUG"
)

// TestTiePostgres runs a fleet of 4 member processes with tied sessions
// and a 10 s TTL on PostgreSQL.
func TestTiePostgres(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		t.Skip("in a child process")
	}
	if testing.Short() {
		t.Skip("starts 4 OS processes per subtest and takes about a minute; skipped with -short")
	}
	pgtest.Need(t)
	t.Run("kill9", testTieKill9)
	t.Run("terminate", testTieTerminate)
	t.Run("stall", testTieStall)
}

// startTieFleet is startPGFleet with tied sessions, a 10 s TTL and 16
// partitions; it then checks that the balanced fleet stays still (no
// handler stops or starts) for tieQuiet: no false takeover.
func startTieFleet(t *testing.T, name string) *pgFleet {
	t.Helper()
	pf := &pgFleet{schema: pgtest.Schema(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, pf.url("test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	pf.st = st
	pf.fleet = newFleet(t, "proctest-tie-"+name, "", tiePartitions, tieFleetTTL)
	pf.interval = pgInterval
	pf.env = []string{envTie + "=1"}
	for i := range pgChildren {
		pf.members = append(pf.members, fmt.Sprintf("c%d", i))
	}
	for _, m := range pf.members {
		pf.start(m, pf.url(m))
	}
	d := pf.waitBalanced("the fleet to spread the partitions", pf.members, 0, 30*time.Second)
	t.Logf("%d tied processes share %d partitions evenly %v after starting (schema %s)", pgChildren, tiePartitions, d.Round(time.Millisecond), pf.schema)
	for _, m := range pf.members {
		pf.tiePID(t, m, 0)
	}
	pf.mu.Lock()
	seq := len(pf.events)
	pf.mu.Unlock()
	time.Sleep(tieQuiet) // watching for something that must not happen
	for _, ev := range pf.snapshotEvents()[seq:] {
		if ev.Ev == "start" || ev.Ev == "stop" {
			t.Errorf("a balanced fleet whose members all live moved a partition: %s %s %s epoch %d", ev.Member, ev.Ev, ev.Partition, ev.Epoch)
		}
	}
	return pf
}

// tiePID waits until member's current session is tied and returns the
// server pid of its tied connection (not gone, a pid terminated before).
func (pf *pgFleet) tiePID(t *testing.T, member string, gone int32) int32 {
	t.Helper()
	S := pgx.Identifier{pf.schema}.Sanitize()
	q := `SELECT a.pid FROM pg_stat_activity a
JOIN ` + S + `.sessions s ON a.application_name = 'herd tie ' || s.id
JOIN ` + S + `.ties x ON x.gid = s.gid AND x.id = s.id AND x.cut IS NULL
WHERE s.member = $1 AND a.pid <> $2`
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var pid int32
		err := pf.st.Pool().QueryRow(ctx, q, member, gone).Scan(&pid)
		cancel()
		if err == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no tied connection 20s on: %v", member, err)
		}
		time.Sleep(20 * time.Millisecond) // polling pg_stat_activity
	}
}

// kill -9 of one member process at a time: every partition it ran runs
// elsewhere in well under the 10 s TTL (asserted under 2 s); a new member
// then takes the victim's place. tieKills rounds, one fleet.
func testTieKill9(t *testing.T) {
	pf := startTieFleet(t, "kill9")
	f := pf.fleet
	members := slices.Clone(pf.members)
	var ds []time.Duration
	for i := range tieKills {
		victim := members[i%len(members)]
		lost, _, worst := f.killAndAwaitTakeover(t, victim, tieFleetTTL+5*time.Second)
		ds = append(ds, worst)
		t.Logf("round %d: kill -9 of %s (%d partitions): all running elsewhere %v later", i, victim, len(lost), worst.Round(time.Millisecond))
		if os.Getenv(envTieDebug) != "" && worst > time.Second {
			pf.dumpLog(t)
		}
		if worst > 2*time.Second {
			t.Errorf("round %d: the last of %s's partitions started elsewhere %v after the kill; want under 2s (TTL %v)", i, victim, worst, tieFleetTTL)
		}
		name := fmt.Sprintf("n%d", i)
		f.start(name, pf.url(name))
		members = append(without(members, victim), name)
		f.waitBalanced("the fleet to take in "+name, members, 1, 30*time.Second)
	}
	t.Logf("kill -9 with tied sessions (TTL %v, %d rounds): every partition of the victim running elsewhere after %s", tieFleetTTL, tieKills, stats(ds))
	f.stopAll()
	f.checkExclusive(nil)
}

// The server ends the tied connection of a live member
// (pg_terminate_backend), tieTerminates times, a member after another:
// the member stops its handlers before anyone (itself, in a new session,
// included) starts its partitions again: never two handlers of one
// partition at once, by the children's timestamps.
func testTieTerminate(t *testing.T) {
	pf := startTieFleet(t, "terminate")
	f := pf.fleet
	t.Cleanup(func() {
		if t.Failed() {
			pf.dumpLog(t)
		}
	})
	var fence, gap, margin []time.Duration
	gone := map[string]int32{}
	for i := range tieTerminates {
		victim := pf.members[i%len(pf.members)]
		pid := pf.tiePID(t, victim, gone[victim])
		lastStop, firstStart := f.cutAndAwaitFence(victim, pf.members, func() {
			pgtest.Exec(t, "SELECT pg_terminate_backend($1)", pid)
		})
		gone[victim] = pid
		fence = append(fence, lastStop)
		if firstStart > 0 {
			gap = append(gap, firstStart)
			margin = append(margin, firstStart-lastStop)
		}
	}
	t.Logf("pg_terminate_backend of a live member's tied connection, %d rounds: its handlers all stopped %s after it; "+
		"its partitions first started again (anywhere) %s after it; the first start came after the last stop by %s",
		tieTerminates, stats(fence), stats(gap), stats(margin))
	f.stopAll()
	checkCheckpoints(t, f.snapshotEvents())
	f.checkExclusive(nil)
}

// dumpLog logs the group's log, for diagnosis.
func (pf *pgFleet) dumpLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	S := pgx.Identifier{pf.schema}.Sanitize()
	rows, err := pf.st.Pool().Query(ctx, `SELECT l.seq, to_char(l.at, 'HH24:MI:SS.US'), l.kind, coalesce(l.session, ''), coalesce(l.member, ''),
  coalesce(l.partition, ''), coalesce(l.epoch::text, '') FROM `+S+`.log l JOIN `+S+`.groups g ON g.gid = l.gid WHERE g.name = $1 ORDER BY l.seq`, pf.group)
	if err != nil {
		t.Logf("log: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var at, sess, member, part, epoch string
		var kind int16
		if err := rows.Scan(&seq, &at, &kind, &sess, &member, &part, &epoch); err != nil {
			t.Logf("log: %v", err)
			return
		}
		t.Logf("log %d %s kind=%d session=%s member=%s partition=%s epoch=%s", seq, at, kind, sess, member, part, epoch)
	}
}
