package proctest

// Sessions tied to a lock file (herd.Config.TieSession, docs/takeover.md)
// on SQLite: kill -9 is taken over in well under the TTL; a live member
// whose lock file is removed fences before anyone runs its partitions;
// members that live keep their sessions.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// sqliteTieQuiet is how long a balanced tied fleet on SQLite is watched
// for a false takeover: several rounds of the members' renewals and
// expiry calls.
const sqliteTieQuiet = 4 * time.Second

// sqliteTieFleet is a fleet of tied members on one SQLite file.
type sqliteTieFleet struct {
	*fleet
	path    string
	db      *sql.DB // the test's own read connection to the file
	members []string
}

// TestTieSQLite runs a fleet of 4 member processes with tied sessions and
// a 10 s TTL on one SQLite file.
func TestTieSQLite(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		t.Skip("in a child process")
	}
	if testing.Short() {
		t.Skip("starts 4 OS processes per subtest and takes about 30s; skipped with -short")
	}
	t.Run("kill9", testSQLiteTieKill9)
	t.Run("lockremoved", testSQLiteTieLockRemoved)
}

// startSQLiteTieFleet starts 4 tied members (TTL 10 s, 16 partitions) on
// a new file, waits until each has a tied session, then checks that the
// balanced fleet stays still for sqliteTieQuiet: no false takeover.
func startSQLiteTieFleet(t *testing.T, name string) *sqliteTieFleet {
	t.Helper()
	path := filepath.Join(t.TempDir(), "herd.db")
	sf := &sqliteTieFleet{path: path}
	sf.fleet = newFleet(t, "proctest-sqlite-tie-"+name, "", tiePartitions, tieFleetTTL)
	sf.fleet.interval, sf.fleet.url = sqliteInterval, "sqlite://"+path
	sf.fleet.env = []string{envTie + "=1"}
	for i := range pgChildren {
		sf.members = append(sf.members, fmt.Sprintf("c%d", i))
	}
	for _, m := range sf.members {
		sf.start(m, sf.url)
	}
	d := sf.waitBalanced("the fleet to spread the partitions", sf.members, 0, 30*time.Second)
	t.Logf("%d tied processes share %d partitions evenly %v after starting", pgChildren, tiePartitions, d.Round(time.Millisecond))
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	sf.db = db
	for _, m := range sf.members {
		sf.tiedSession(t, m, "")
	}
	sf.mu.Lock()
	seq := len(sf.events)
	sf.mu.Unlock()
	time.Sleep(sqliteTieQuiet) // watching for something that must not happen
	for _, ev := range sf.snapshotEvents()[seq:] {
		if ev.Ev == "start" || ev.Ev == "stop" {
			t.Errorf("a balanced fleet whose members all live moved a partition: %s %s %s epoch %d", ev.Member, ev.Ev, ev.Partition, ev.Epoch)
		}
	}
	return sf
}

// tiedSession waits until member has a tied, uncut session other than
// not, and returns its id.
func (sf *sqliteTieFleet) tiedSession(t *testing.T, member, not string) string {
	t.Helper()
	const q = `SELECT s.id FROM herd_sessions s JOIN herd_ties x ON x.gid = s.gid AND x.id = s.id AND x.cut IS NULL
WHERE s.member = ? AND s.id <> ?`
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var id string
		err := sf.db.QueryRowContext(ctx, q, member, not).Scan(&id)
		cancel()
		if err == nil {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no tied session 20s on: %v", member, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the file
	}
}

// kill -9 of one member process at a time: every partition it ran runs
// elsewhere in well under the 10 s TTL (asserted under 2 s); a new member
// then takes the victim's place. tieKills rounds, one fleet.
func testSQLiteTieKill9(t *testing.T) {
	sf := startSQLiteTieFleet(t, "kill9")
	members := slices.Clone(sf.members)
	var ds []time.Duration
	for i := range tieKills {
		victim := members[i%len(members)]
		lost, _, worst := sf.killAndAwaitTakeover(t, victim, tieFleetTTL+5*time.Second)
		ds = append(ds, worst)
		t.Logf("round %d: kill -9 of %s (%d partitions): all running elsewhere %v later", i, victim, len(lost), worst.Round(time.Millisecond))
		if worst > 2*time.Second {
			t.Errorf("round %d: the last of %s's partitions started elsewhere %v after the kill; want under 2s (TTL %v)", i, victim, worst, tieFleetTTL)
		}
		name := fmt.Sprintf("n%d", i)
		sf.start(name, sf.url)
		members = append(without(members, victim), name)
		sf.waitBalanced("the fleet to take in "+name, members, 1, 30*time.Second)
		sf.tiedSession(t, name, "")
	}
	t.Logf("kill -9 with tied sessions on SQLite (TTL %v, %d rounds): every partition of the victim running elsewhere after %s", tieFleetTTL, tieKills, stats(ds))
	sf.stopAll()
	sf.checkExclusive(nil)
}

// The lock file of a live member's tied session is removed, a member
// after another: the member stops its handlers (its tie is lost) before
// anyone, itself in a new session included, starts its partitions again,
// and the store never takes the missing file for a death.
func testSQLiteTieLockRemoved(t *testing.T) {
	sf := startSQLiteTieFleet(t, "lockremoved")
	f := sf.fleet
	var fence, gap []time.Duration
	prev := map[string]string{}
	for i := range 2 * len(sf.members) {
		victim := sf.members[i%len(sf.members)]
		id := sf.tiedSession(t, victim, prev[victim])
		prev[victim] = id
		lastStop, firstStart := f.cutAndAwaitFence(victim, sf.members, func() {
			if err := os.Remove(filepath.Join(sf.path+"-herd-ties", id)); err != nil {
				t.Fatal(err)
			}
		})
		if firstStart > 0 && firstStart < lastStop {
			t.Errorf("round %d: a partition of %s started again %v after its lock file was removed, before %s's last handler stopped (%v)", i, victim, firstStart, victim, lastStop)
		}
		fence = append(fence, lastStop)
		if firstStart > 0 {
			gap = append(gap, firstStart)
		}
	}
	t.Logf("lock file of a live member removed, %d rounds: its handlers all stopped %s after it; its partitions first started again %s after it",
		2*len(sf.members), stats(fence), stats(gap))
	f.stopAll()
	checkCheckpoints(t, f.snapshotEvents())
	f.checkExclusive(nil)
}
