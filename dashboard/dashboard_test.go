package dashboard_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/dashboard"
	"github.com/herdhq/herd/store"
)

// serve serves h on a loopback test server; both stop when t ends.
func serve(t *testing.T, h *dashboard.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { h.Close() }) // first: it ends the event streams srv.Close waits for
	return srv.URL
}

// owners follows a group's owners from its events: partition -> session,
// and the live sessions.
type owners struct {
	part map[string]string
	live map[string]string // session -> member
}

func (o *owners) apply(t *testing.T, ev sseEvent) {
	t.Helper()
	switch ev.name {
	case "state":
		g := decodeState(t, ev.data)
		o.part, o.live = map[string]string{}, map[string]string{}
		for i, p := range g.Partitions {
			o.part[p] = ""
			if g.Owner[i] >= 0 {
				o.part[p] = g.Sessions[g.Owner[i]]
			}
		}
		for _, m := range g.Members {
			o.live[m.Session] = m.Member
		}
	case "delta":
		var d struct {
			Members []struct{ Session, Member string }
			Parts   []struct {
				ID, Session string
				Epoch       uint64
			}
		}
		mustJSON(t, ev.data, &d)
		o.live = map[string]string{}
		for _, m := range d.Members {
			o.live[m.Session] = m.Member
		}
		for _, p := range d.Parts {
			o.part[p.ID] = p.Session
		}
	case "problem":
		t.Logf("problem event: %s", ev.data)
	}
}

// allRunBy reports whether every partition is run by session, alive.
func (o *owners) allRunBy(session string) bool {
	if _, ok := o.live[session]; !ok || len(o.part) == 0 {
		return false
	}
	for _, s := range o.part {
		if s != session {
			return false
		}
	}
	return true
}

// A member frozen until its session expires loses its partitions to the
// other: /api/group and the event stream both show the takeover, on every
// backend.
func TestTakeoverShown(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			group, ttl := uniqueGroup(t), time.Second
			a := join(t, b.rw, group, "a", herd.Numbered(8), ttl)
			m := join(t, b.rw, group, "b", nil, ttl)
			base := serve(t, dashboard.New(b.ro, dashboard.WithLogger(quiet)))
			g := waitGroup(t, base, group, 10*time.Second, func(g groupJSON) bool {
				return len(g.Members) == 2 && g.Unowned == 0 && g.Members[0].Owned > 0 && g.Members[1].Owned > 0
			})
			if len(g.Partitions) != 8 || g.Members[0].Owned+g.Members[1].Owned != 8 {
				t.Fatalf("group: %+v", g)
			}
			_, _, body := get(t, base+"/api/groups", "")
			if !strings.Contains(string(body), `"`+group+`"`) {
				t.Fatalf("/api/groups does not list %s: %s", group, body)
			}

			evs := openEvents(t, base, group)
			var o owners
			if ev := next(t, evs, 5*time.Second); ev.name != "state" {
				t.Fatalf("first event %q, want state", ev.name)
			} else {
				o.apply(t, ev)
			}
			a.gate.Pause() // a stops renewing: its session expires after ttl
			paused := time.Now()
			for !o.allRunBy(m.Session()) {
				o.apply(t, next(t, evs, ttl+5*time.Second))
			}
			t.Logf("%s: the event stream showed the takeover %v after the pause (TTL %v)", b.name, time.Since(paused).Round(time.Millisecond), ttl)
			if _, ok := o.live[a.Session()]; ok {
				t.Fatalf("a's session is still live in the events: %v", o.live)
			}
			g = waitGroup(t, base, group, time.Second, func(g groupJSON) bool { return true })
			if len(g.Members) != 1 || g.Members[0].Member != "b" || g.Members[0].Owned != 8 || g.Unowned != 0 {
				t.Fatalf("/api/group after the takeover: %+v", g)
			}
		})
	}
}

// With a token, a request without it, or with another, is refused with
// 401; the page and the API answer with it as a bearer token or as the
// password of basic auth. Every answer carries the security headers and
// none the token.
func TestToken(t *testing.T) {
	b := backends(t)[0]
	const token = "tok-3f9a7c1e"
	base := serve(t, dashboard.New(b.ro, dashboard.WithToken(token), dashboard.WithLogger(quiet)))
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("anyone:"+token))
	for _, c := range []struct {
		path, auth string
		want       int
	}{
		{"/", "", http.StatusUnauthorized},
		{"/api/groups", "", http.StatusUnauthorized},
		{"/api/events?group=g", "", http.StatusUnauthorized},
		{"/", "Bearer wrong", http.StatusUnauthorized},
		{"/", "Bearer " + token + "x", http.StatusUnauthorized},
		{"/", "Basic " + base64.StdEncoding.EncodeToString([]byte("u:wrong")), http.StatusUnauthorized},
		{"/", "Bearer " + token, http.StatusOK},
		{"/app.js", "Bearer " + token, http.StatusOK},
		{"/api/groups", "Bearer " + token, http.StatusOK},
		{"/", basic, http.StatusOK},
	} {
		code, hd, body := get(t, base+c.path, c.auth)
		if code != c.want {
			t.Errorf("GET %s with %q: %d, want %d", c.path, c.auth, code, c.want)
		}
		if code == http.StatusUnauthorized && !strings.Contains(strings.Join(hd.Values("WWW-Authenticate"), " "), "Basic") {
			t.Errorf("GET %s: 401 without a Basic challenge: %q", c.path, hd.Values("WWW-Authenticate"))
		}
		if csp := hd.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", c.path, csp)
		}
		if strings.Contains(string(body), token) {
			t.Errorf("GET %s: the answer holds the token", c.path)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/api/groups", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
}

// failing is a real store whose reads fail with an error naming a secret,
// as a driver's error may name a host and user.
type failing struct {
	store.Store
	fail atomic.Bool
}

const secret = "hunter2-f00d"

func (f *failing) err() error {
	return fmt.Errorf("dial redis://admin:%s@db.internal:6379: %w", secret, store.ErrUnavailable)
}

func (f *failing) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	if f.fail.Load() {
		return nil, f.err()
	}
	return f.Store.Snapshot(ctx, group)
}

func (f *failing) Groups(ctx context.Context) ([]string, error) { return nil, f.err() }

// A store's error reaches the page as its kind only: its text, which may
// name a password, stays in the dashboard's log.
func TestNoSecretInOutput(t *testing.T) {
	b := backends(t)[0]
	f := &failing{Store: b.ro}
	f.fail.Store(true)
	base := serve(t, dashboard.New(f, dashboard.WithLogger(quiet), dashboard.WithRetry(10*time.Millisecond)))
	for _, p := range []string{"/", "/app.js", "/app.css", "/api/groups", "/api/group?group=g"} {
		_, _, body := get(t, base+p, "")
		if strings.Contains(string(body), secret) || strings.Contains(string(body), "db.internal") {
			t.Errorf("GET %s shows the store's error text: %s", p, body)
		}
	}
	evs := openEvents(t, base, "g")
	ev := next(t, evs, 5*time.Second)
	if ev.name != "problem" || strings.Contains(ev.data, secret) || !strings.Contains(ev.data, "unavailable") {
		t.Fatalf("event %q %s: want a problem naming the store unavailable, without its text", ev.name, ev.data)
	}
}

// counting counts a real store's snapshot reads.
type counting struct {
	store.Store
	snapshots atomic.Int64
}

func (c *counting) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	c.snapshots.Add(1)
	return c.Store.Snapshot(ctx, group)
}

// Many pages of one group share one follower: one snapshot read for all
// (and one more, the refresher's first read of TTLs and checkpoints), and
// every page gets every change.
func TestOneFollowerPerGroup(t *testing.T) {
	b := backends(t)[0]
	group := uniqueGroup(t)
	join(t, b.rw, group, "a", herd.Numbered(4), time.Second)
	c := &counting{Store: b.ro}
	base := serve(t, dashboard.New(c, dashboard.WithLogger(quiet), dashboard.WithRefresh(time.Hour)))
	var streams []<-chan sseEvent
	for range 10 {
		evs := openEvents(t, base, group)
		if ev := next(t, evs, 5*time.Second); ev.name != "state" {
			t.Fatalf("first event %q, want state", ev.name)
		}
		streams = append(streams, evs)
	}
	for _, evs := range streams {
		nextRefresh(t, evs, 5*time.Second)
	}
	if n := c.snapshots.Load(); n != 2 {
		t.Errorf("10 pages made %d snapshot reads, want 2 (the follower's and the refresher's)", n)
	}
	m := join(t, b.rw, group, "b", nil, time.Second)
	for _, evs := range streams {
		for {
			ev := next(t, evs, 5*time.Second)
			if ev.name == "delta" && strings.Contains(ev.data, m.Session()) {
				break
			}
		}
	}
	if n := c.snapshots.Load(); n != 2 {
		t.Errorf("after a change, %d snapshot reads, want 2", n)
	}
}

// A group deleted and written again under an open page: its log cannot be
// continued (store.ErrVersionGone), so the follower reads the group again
// and the page gets the new group as a state.
func TestGroupRecreated(t *testing.T) {
	b := backends(t)[0]
	group := uniqueGroup(t)
	a := join(t, b.rw, group, "a", herd.Numbered(4), time.Second)
	base := serve(t, dashboard.New(b.ro, dashboard.WithLogger(quiet)))
	evs := openEvents(t, base, group)
	if ev := next(t, evs, 5*time.Second); ev.name != "state" {
		t.Fatalf("first event %q, want state", ev.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.rw.DeleteGroup(ctx, group, true); err != nil {
		t.Fatal(err)
	}
	z := join(t, b.rw, group, "z", herd.Numbered(6), time.Second)
	// A state of the group written again (read before z's session or
	// claims, maybe), then its deltas: z runs its 6 partitions.
	var o owners
	fresh := false
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		ev := next(t, evs, 10*time.Second)
		if ev.name == "state" {
			fresh = len(decodeState(t, ev.data).Partitions) == 6
		}
		if ev.name == "state" || ev.name == "delta" && o.part != nil {
			o.apply(t, ev)
		}
		if fresh && len(o.part) == 6 && o.allRunBy(z.Session()) {
			return
		}
	}
	t.Fatal("no state of the group written again, run by z, within 15 s")
}
