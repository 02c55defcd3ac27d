package proctest

import (
	"syscall"
	"testing"
	"time"
)

const (
	tieStalls = 3 // SIGSTOP rounds
	// tieStall is past the tie's silence deadline at the fleet's TTL
	// (pgstore: 2 s + TTL/4 = 4.5 s) and short of the renewal fence
	// (at least TTL - FenceMargin - RenewInterval = 5.67 s after a stop).
	tieStall = 4800 * time.Millisecond
)

// A tied member stalled (SIGSTOP) past its tie's silence deadline but not
// past its fence keeps its session after SIGCONT: it reads the watch's
// answer that came during the stall before it judges its connection cut,
// so no handler stops and no partition moves.
func testTieStall(t *testing.T) {
	pf := startTieFleet(t, "stall")
	f := pf.fleet
	for i := range tieStalls {
		victim := pf.members[i%len(pf.members)]
		n0 := len(f.snapshotEvents())
		f.signal(victim, syscall.SIGSTOP)
		time.Sleep(tieStall) // the stall itself
		f.signal(victim, syscall.SIGCONT)
		time.Sleep(2 * time.Second) // watching for a stop that must not happen
		for _, ev := range f.snapshotEvents()[n0:] {
			if ev.Ev == "stop" || ev.Ev == "start" {
				t.Errorf("round %d: %s of partition %s on %s after %s was stalled %v and resumed; want none",
					i, ev.Ev, ev.Partition, ev.Member, victim, tieStall)
			}
		}
	}
	f.stopAll()
	f.checkExclusive(nil)
}
