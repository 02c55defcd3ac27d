package dashboard_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/dashboard"
)

// The request of a group's page (?group=NAME) starts the group's read,
// before the page opens its events; the page then gets the state the
// follower read, without a read of its own.
func TestPageRequestStartsTheRead(t *testing.T) {
	b := backends(t)[0]
	group := uniqueGroup(t)
	join(t, b.rw, group, "a", herd.Numbered(4), time.Second)
	c := &counting{Store: b.ro}
	base := serve(t, dashboard.New(c, dashboard.WithLogger(quiet), dashboard.WithRefresh(time.Hour)))
	if code, _, _ := get(t, base+"/?group="+group, ""); code != http.StatusOK {
		t.Fatalf("the page: status %d", code)
	}
	waitFor(t, "the group's read, with no page open", 5*time.Second, func() bool { return c.snapshots.Load() == 1 })
	evs := openEvents(t, base, group)
	if ev := next(t, evs, 5*time.Second); ev.name != "state" {
		t.Fatalf("first event %q, want state", ev.name)
	}
	nextRefresh(t, evs, 5*time.Second)
	if n := c.snapshots.Load(); n != 2 {
		t.Errorf("%d snapshot reads, want 2 (the follower's, begun by the page's request, and the refresher's)", n)
	}
	if code, _, _ := get(t, base+"/?group=bad%0Aid", ""); code != http.StatusOK {
		t.Errorf("the page with an invalid group: status %d, want 200 (the page says so)", code)
	}
}

// A group whose last page closed is followed for the linger: a page that
// opens then is sent its state at once, without a read of the group, and
// the last refresh if the refresher's next read is not due yet.
func TestLingerKeepsTheFollower(t *testing.T) {
	b := backends(t)[0]
	group := uniqueGroup(t)
	join(t, b.rw, group, "a", herd.Numbered(4), time.Second)
	c := &counting{Store: b.ro}
	h := dashboard.New(c, dashboard.WithLogger(quiet), dashboard.WithRefresh(time.Hour), dashboard.WithLinger(time.Hour))
	base := serve(t, h)
	evs, stop := openEventsStop(t, base, group)
	if ev := next(t, evs, 5*time.Second); ev.name != "state" {
		t.Fatalf("first event %q, want state", ev.name)
	}
	r := nextRefresh(t, evs, 5*time.Second)
	stop()
	again := openEvents(t, base, group)
	if ev := next(t, again, 5*time.Second); ev.name != "state" {
		t.Fatalf("first event after the page reopened %q, want state", ev.name)
	}
	if r2 := nextRefresh(t, again, 5*time.Second); r2.Seq != r.Seq {
		t.Errorf("the reopened page got refresh %d, want the last one, %d", r2.Seq, r.Seq)
	}
	if n := c.snapshots.Load(); n != 2 {
		t.Errorf("%d snapshot reads, want 2 (the follower's and the refresher's)", n)
	}
	if n := dashboard.Refreshers(h); n != 1 {
		t.Errorf("%d refreshers, want 1", n)
	}
}

// A page that opens on a lingering group after the refresher's next read
// was due is not sent the last refresh (its TTLs are older than the page
// would take them to be): the refresher, which did not read while no
// page was open, reads again for it.
func TestLingerRefreshesAgain(t *testing.T) {
	const refresh = 100 * time.Millisecond
	b := backends(t)[0]
	group := uniqueGroup(t)
	join(t, b.rw, group, "a", herd.Numbered(4), time.Second)
	h := dashboard.New(b.ro, dashboard.WithLogger(quiet), dashboard.WithRefresh(refresh), dashboard.WithLinger(time.Hour))
	base := serve(t, h)
	evs, stop := openEventsStop(t, base, group)
	r := nextRefresh(t, evs, 5*time.Second)
	stop()
	time.Sleep(5 * refresh) // past the next read's due time (a slow read spaces them by 4 times its length)
	again := openEvents(t, base, group)
	if r2 := nextRefresh(t, again, 5*time.Second); r2.Seq <= r.Seq {
		t.Errorf("the page reopened after the next read was due got refresh %d, want one after %d", r2.Seq, r.Seq)
	}
}
