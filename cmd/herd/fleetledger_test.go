package main

import (
	"testing"
	"time"
)

// The ledger replays the members' reports in the order they happened, not
// the order they arrived: a handoff reported late by the old owner is not
// two owners at once; a real overlap is.
func TestLedgerHandoffInTimeOrder(t *testing.T) {
	l := newLedger(2)
	l.apply(0, 0, true, 10)
	l.apply(0, 1, true, 10)
	if !l.balanced([]int32{0}) {
		t.Fatal("one member running both partitions: not balanced")
	}
	l.reset()
	// m1 started partition 1 at 30; m0's stop of it at 20 arrives after.
	l.apply(1, 1, true, 30)
	if l.balanced([]int32{0, 1}) {
		t.Fatal("partition 1 reported on two members: balanced")
	}
	l.apply(0, 1, false, 20)
	if !l.balanced([]int32{0, 1}) {
		t.Fatal("one partition each: not balanced")
	}
	if moves, most := l.sweep(); moves != 1 || most != 1 {
		t.Fatalf("sweep = %d moves, %d at most at once; want 1, 1", moves, most)
	}
	l.reset()
	// m0 starts partition 1 again at 40 while m1 stops it only at 50.
	l.apply(0, 1, true, 40)
	l.apply(1, 1, false, 50)
	if moves, most := l.sweep(); moves != 1 || most != 2 {
		t.Fatalf("sweep = %d moves, %d at most at once; want 1, 2", moves, most)
	}
}

// A killed member's partitions are dropped at the time of the kill, and a
// member that runs nothing fails the even spread.
func TestLedgerDropAndSpread(t *testing.T) {
	l := newLedger(4)
	for p := range int32(4) {
		l.apply(p%2, p, true, 1)
	}
	if l.balanced([]int32{0, 1, 2}) {
		t.Fatal("member 2 runs nothing: balanced")
	}
	l.reset()
	l.drop(1, 5)
	if l.balanced([]int32{0}) {
		t.Fatal("partitions 1 and 3 run nowhere: balanced")
	}
	l.apply(0, 1, true, 6)
	l.apply(0, 3, true, 7)
	if !l.balanced([]int32{0}) || l.latest != 7 {
		t.Fatalf("balanced %v, latest %d; want true, 7", l.balanced([]int32{0}), l.latest)
	}
	if moves, most := l.sweep(); moves != 2 || most != 1 {
		t.Fatalf("sweep = %d moves, %d at most at once; want 2, 1", moves, most)
	}
}

// A member that started and stopped a partition within one report runs it
// no more: the report keeps the order it saw them in.
func TestOwnReportKeepsOrder(t *testing.T) {
	f := newProcFleet("", "", "g", 1, time.Second, false, nil, nil)
	m := &memberProc{idx: 0, id: "m1", joined: make(chan error, 1)}
	f.all = append(f.all, m)
	r := &reporter{}
	r.timer = time.AfterFunc(time.Hour, func() {})
	r.changed(0, true)
	r.changed(0, false)
	f.report(m, memberReport{Event: "own", At0: r.pending.At0, Own: r.pending.Own, OwnT: r.pending.OwnT})
	if len(f.led.holders[0]) != 0 {
		t.Fatalf("partition 0 runs on %v after its start and stop; want nowhere", f.led.holders[0])
	}
}

// A crash's takeover time is until the last of the killed member's
// partitions started elsewhere; a start before the kill or on the killed
// member does not count.
func TestLedgerTakeover(t *testing.T) {
	l := newLedger(3)
	for p := range int32(3) {
		l.apply(p%2, p, true, 1)
	}
	l.reset()
	dead := func(m int32) bool { return m == 1 }
	l.drop(1, 100) // member 1 ran partition 1
	if _, ok := l.takeover(dead, 100); ok {
		t.Fatal("partition 1 runs nowhere: a takeover time")
	}
	l.apply(0, 1, true, 90) // reported out of order, before the kill: not a takeover
	l.apply(0, 1, false, 95)
	if _, ok := l.takeover(dead, 100); ok {
		t.Fatal("partition 1 started before the kill only: a takeover time")
	}
	l.apply(2, 1, true, 400)
	l.apply(0, 1, true, 300)
	if d, ok := l.takeover(dead, 100); !ok || d != 200 {
		t.Fatalf("takeover = %v, %v; want 200ns, true", d, ok)
	}
	if _, ok := l.takeover(func(int32) bool { return false }, 100); ok {
		t.Fatal("no member killed: a takeover time")
	}
}
