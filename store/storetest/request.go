package storetest

// Requests (store.Store.Request): an entry of the log that changes nothing
// else, written without a session, read by members through Changes.

import (
	"errors"
	"fmt"
	"time"

	"github.com/herdhq/herd/store"
)

// testRequestLogged: each request appends one Requested entry with its
// action and target, needs no session, and changes no record, session or
// partition set: the snapshot before plus the entries equals the snapshot
// after, whose version counts the requests.
func testRequestLogged(e *env) {
	t := e.t
	sess := e.open("m1", longTTL)
	e.setPartitions("a", "b")
	held := e.claim("a", sess)
	e.checkpoint("a", held.Epoch, "progress")
	before := e.snap()
	reqs := []store.Request{
		{Action: store.RequestRun, Partition: "a"},
		{Action: store.RequestPause, Partition: "b"},
		{Action: store.RequestResume, Partition: "b"},
		{Action: store.RequestLeave, Member: "m1"},
		{Action: store.RequestRun, Partition: "not-in-the-set"}, // kept in the log all the same
	}
	for _, r := range reqs {
		if err := e.s.Request(e.ctx, e.group, r); err != nil {
			t.Fatalf("Request(%+v): %v; want nil", r, err)
		}
	}
	after := e.snap()
	if after.Version.Seq != before.Version.Seq+uint64(len(reqs)) {
		t.Fatalf("after %d requests the version is %v, from %v; want one entry per request", len(reqs), after.Version, before.Version)
	}
	cs := e.readLog(before.Version, after.Version)
	for i, c := range cs {
		want := reqs[i].Change()
		want.Version, want.At = c.Version, c.At
		if fmt.Sprintf("%+v", c) != fmt.Sprintf("%+v", want) {
			t.Fatalf("entry %d of the requests is %+v; want %+v", i, c, want)
		}
		if c.Request() != reqs[i] {
			t.Fatalf("entry %d's Request() is %+v; want %+v", i, c.Request(), reqs[i])
		}
	}
	replay(t, before, after, cs, "requests")
	// The owner's record and checkpoint are untouched.
	if o := e.mustRecord("a"); o.Session != sess || o.Epoch != held.Epoch {
		t.Fatalf("after the requests the record of %q is %s; want it still held by %q at epoch %d", "a", fmtOwner(o), sess, held.Epoch)
	}
	e.checkpoint("a", held.Epoch, "still the owner")

	// A group nobody wrote to yet: the request starts its log.
	fresh := newGroup(t, "-fresh")
	if err := e.s.Request(e.ctx, fresh, store.Request{Action: store.RequestLeave, Member: "anyone"}); err != nil {
		t.Fatalf("Request in a group never written: %v; want nil", err)
	}
	s := e.snapOf(fresh)
	if s.Version.Seq != 1 || len(s.Sessions) != 0 || len(s.Owners) != 0 || s.PartitionSetStored {
		t.Fatalf("a group with one request: version %v, %d sessions, %d records, set stored %v; want version 1 and nothing else",
			s.Version, len(s.Sessions), len(s.Owners), s.PartitionSetStored)
	}
}

// testRequestWakesChanges: a reader waiting at the end of the log gets a
// request's entry as it gets any other, within eventWait: members act on
// requests without reading anything more than the log they follow.
func testRequestWakesChanges(e *env) {
	t := e.t
	e.open("m", longTTL)
	v := e.snap().Version
	got := waitingReader(e, v)
	req := store.Request{Action: store.RequestRun, Partition: "k"}
	if err := e.s.Request(e.ctx, e.group, req); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil || len(r.cs) != 1 || r.cs[0].Kind != store.Requested || r.cs[0].Request() != req || r.cs[0].Version.Seq != v.Seq+1 {
			t.Fatalf("Changes woken by Request returned %+v, %v; want the one Requested entry %d", r.cs, r.err, v.Seq+1)
		}
	case <-time.After(eventWait):
		t.Fatalf("Changes did not return within %v of Request", eventWait)
	}
}

// testRequestInvalid: an unknown action, a target of the wrong kind, or a
// malformed id is ErrInvalid, and nothing is logged.
func testRequestInvalid(e *env) {
	t := e.t
	e.open("m", longTTL)
	v := e.snap().Version
	bad := []store.Request{
		{},
		{Action: "explode", Partition: "a"},
		{Action: store.RequestRun},
		{Action: store.RequestRun, Partition: "a", Member: "m"},
		{Action: store.RequestPause, Member: "m"},
		{Action: store.RequestResume, Partition: "bad\nid"},
		{Action: store.RequestLeave},
		{Action: store.RequestLeave, Member: "m", Partition: "a"},
	}
	for _, r := range bad {
		if err := e.s.Request(e.ctx, e.group, r); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Request(%+v): %v; want ErrInvalid", r, err)
		}
	}
	if err := e.s.Request(e.ctx, "", store.Request{Action: store.RequestRun, Partition: "a"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Request in group \"\": %v; want ErrInvalid", err)
	}
	if got := e.snap().Version; got != v {
		t.Fatalf("after rejected requests the version is %v; want %v (nothing logged)", got, v)
	}
}
