package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/herdhq/herd/store/storetest"
)

// A session that dies right after it was tied is seen at once: its tie
// makes the tie before it in the ring watch it (nudge), instead of
// finishing a wait on the one after it (up to a round of its wait).
func TestTieNewcomerWatchedAtOnce(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "tie-newcomer"
	for _, m := range []string{"a", "b", "c"} {
		tied(ctx, t, s, group, m)
	}
	for i := range 4 {
		// A tie 0-900 ms into the others' waits.
		time.Sleep(300*time.Millisecond + time.Duration(i)*watchBeat/7)
		id, tn := tied(ctx, t, s, group, "n")
		v := storetest.Version(ctx, t, s, group)
		at := time.Now()
		_ = tn.(*tie).conn.PgConn().Conn().Close() // the process's death, for the server
		d := storetest.WaitExpired(ctx, t, s, group, v, id, 5*time.Second).Sub(at)
		t.Logf("a session tied and dead at once ended %v later (grace %v)", d.Round(time.Millisecond), tieGrace)
		if d > tieGrace+watchBeat/3 {
			t.Errorf("a session tied and dead at once ended %v later; want within the grace %v and %v", d, tieGrace, watchBeat/3)
		}
	}
}
