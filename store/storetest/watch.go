package storetest

import (
	"context"
	"time"

	"github.com/herdhq/herd/store"
)

// feed reads one Watch channel.
type feed struct {
	e    *env
	name string
	ch   <-chan store.Event
}

func (e *env) watch(ctx context.Context, group, name string) *feed {
	e.t.Helper()
	ch, err := e.s.Watch(ctx, group)
	if err != nil {
		e.t.Fatalf("Watch(%q): %v; want a feed", group, err)
	}
	if ch == nil {
		e.t.Fatalf("Watch(%q) returned a nil channel and no error", group)
	}
	return &feed{e: e, name: name, ch: ch}
}

// waitFor reads the feed until an event matching match arrives and returns
// the events received before it. It fails the test if none arrives within
// eventWait. Events are hints and may come with EventResync in between; the
// caller decides what may be skipped.
func (f *feed) waitFor(what string, match func(store.Event) bool) (skipped []store.Event) {
	f.e.t.Helper()
	timer := time.NewTimer(eventWait)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-f.ch:
			if !ok {
				f.e.t.Fatalf("%s: Watch channel closed while waiting for %s (received before: %v); want it open until its ctx is cancelled", f.name, what, skipped)
			}
			if match(ev) {
				return skipped
			}
			skipped = append(skipped, ev)
		case <-timer.C:
			f.e.t.Fatalf("%s: no %s within %v of the change (received instead: %v); want it delivered promptly", f.name, what, eventWait, skipped)
		}
	}
}

// waitClosed reads the feed until it is closed, failing the test if that
// takes longer than promptly.
func (f *feed) waitClosed(why string) {
	f.e.t.Helper()
	timer := time.NewTimer(promptly)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-f.ch:
			if !ok {
				return
			}
		case <-timer.C:
			f.e.t.Fatalf("%s: Watch channel still open %v after %s; want it closed", f.name, promptly, why)
		}
	}
}

func isEvent(kind store.EventKind, session, partition string) func(store.Event) bool {
	return func(ev store.Event) bool {
		if ev.Kind != kind {
			return false
		}
		switch kind {
		case store.EventJoined, store.EventLeft:
			return ev.Session == session
		case store.EventClaimed, store.EventReleased:
			// The partition is what matters; the session, if given, must be right.
			return ev.Partition == partition && (ev.Session == "" || ev.Session == session)
		}
		return true
	}
}

// testWatchEvents: every change that publishes reaches the feed promptly,
// KeepAlive and Checkpoint publish nothing, and the feed closes with its ctx.
func testWatchEvents(e *env) {
	t := e.t
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	f := e.watch(ctx, e.group, "watcher")

	s := e.open("member", longTTL)
	f.waitFor("EventJoined for the new session "+s, isEvent(store.EventJoined, s, ""))
	e.setPartitions("p1", "p2")
	f.waitFor("EventPartitions after SetPartitions", isEvent(store.EventPartitions, "", ""))
	o := e.claim("p1", s)
	f.waitFor("EventClaimed for p1", isEvent(store.EventClaimed, s, "p1"))

	if err := keepErr(e.s.KeepAlive(e.ctx, e.group, s, longTTL)); err != nil {
		t.Fatal(err)
	}
	e.checkpoint("p1", o.Epoch, "cp")
	e.release("p1", s, o.Epoch)
	skipped := f.waitFor("EventReleased for p1", isEvent(store.EventReleased, s, "p1"))
	for _, ev := range skipped {
		if ev.Kind != store.EventResync {
			t.Fatalf("between Claim and Release, the feed delivered %v (all: %v); want nothing: KeepAlive and Checkpoint publish nothing", ev, skipped)
		}
	}

	e.claim("p2", s)
	f.waitFor("EventClaimed for p2", isEvent(store.EventClaimed, s, "p2"))
	e.close(s)
	f.waitFor("EventLeft for the closed session "+s, isEvent(store.EventLeft, s, ""))

	cancel()
	f.waitClosed("its ctx was cancelled")
}

// testWatchFanOut: two watchers of one group both get every event.
func testWatchFanOut(e *env) {
	f1 := e.watch(e.ctx, e.group, "first watcher")
	f2 := e.watch(e.ctx, e.group, "second watcher")
	s := e.open("member", longTTL)
	e.claim("p", s)
	for _, f := range []*feed{f1, f2} {
		f.waitFor("EventJoined for "+s, isEvent(store.EventJoined, s, ""))
		f.waitFor("EventClaimed for p", isEvent(store.EventClaimed, s, "p"))
	}
}

// testWatchOtherGroup: a feed carries its own group's events only.
func testWatchOtherGroup(e *env) {
	t := e.t
	f := e.watch(e.ctx, e.group, "watcher of group 1")
	other := newGroup(t, "-other")
	foreign := e.openIn(other, "member", 1, longTTL)
	if _, err := e.s.Claim(e.ctx, other, "p", foreign); err != nil {
		t.Fatal(err)
	}
	own := e.open("member", longTTL)
	skipped := f.waitFor("EventJoined for "+own, isEvent(store.EventJoined, own, ""))
	for _, ev := range skipped {
		if ev.Kind != store.EventResync {
			t.Fatalf("the feed of group 1 delivered %v, caused by changes in group 2 (all: %v); want only group 1's events", ev, skipped)
		}
	}
}

// testWatchCloses: cancelling the ctx closes the channel, also when nothing
// is happening in the group.
func testWatchCloses(e *env) {
	ctx, cancel := context.WithCancel(e.ctx)
	f := e.watch(ctx, e.group, "idle watcher")
	cancel()
	f.waitClosed("its ctx was cancelled")
}
