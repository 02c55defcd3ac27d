package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

func TestConformance(t *testing.T) {
	raw := redistest.Need(t)
	prefix := testPrefix(t, raw)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openWithPrefix(t, prefix)
	})
}

// TestConformanceNew runs the suite on a store made by New with a client
// the caller owns (speaking RESP2, where Lua false arrives as nil rather
// than as a RESP3 boolean).
func TestConformanceNew(t *testing.T) {
	raw := redistest.Need(t)
	prefix := testPrefix(t, raw)
	opt, err := redis.ParseURL(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.Protocol = 2
	client := redis.NewClient(opt)
	t.Cleanup(func() { _ = client.Close() })
	storetest.Run(t, func(t *testing.T) store.Store {
		s := New(client, WithPrefix(prefix))
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestOpenBadURLs(t *testing.T) {
	ctx := ctxT(t)
	for _, u := range []string{
		"",
		"localhost:6379",
		"http://localhost:6379",
		"redis://local host:6379",
		"redis://localhost:port",
		"redis://localhost:6379/notadb",
		"redis://localhost:6379/0/1",
		"redis://localhost:6379?no_such_option=1",
		"redis://localhost:6379?prefix=",
		"redis://localhost:6379?prefix=a{b}",
		"redis://localhost:6379?prefix=a&prefix=b",
		"redis://u:sekr3t@localhost:6379?dial_timeout=forever",
		"redis://u:sekr3t@local host:6379",
		"redis://%zz",
		"::::",
		"\x00",
	} {
		s, err := Open(ctx, u)
		if err == nil {
			_ = s.Close()
			t.Fatalf("Open(%q) succeeded; want ErrInvalid", u)
		}
		wantIs(t, err, store.ErrInvalid, fmt.Sprintf("Open(%q)", u))
		if strings.Contains(err.Error(), "sekr3t") {
			t.Fatalf("Open(%q) error %q shows the password", u, err)
		}
	}
	s, err := Open(ctx, "redis://localhost:6379", WithPrefix("x}"))
	if err == nil {
		_ = s.Close()
	}
	wantIs(t, err, store.ErrInvalid, "Open with WithPrefix(\"x}\")")
}

func TestOpenUnreachable(t *testing.T) {
	ctx := ctxT(t)
	for _, u := range []string{
		"redis://u:sekr3t@127.0.0.1:1/0?dial_timeout=1s&max_retries=-1",
		"rediss://127.0.0.1:1/0?dial_timeout=1s&max_retries=-1",
	} {
		start := time.Now()
		s, err := Open(ctx, u)
		if err == nil {
			_ = s.Close()
			t.Fatalf("Open(%q) succeeded; want ErrUnavailable", u)
		}
		wantIs(t, err, store.ErrUnavailable, fmt.Sprintf("Open(%q)", u))
		if strings.Contains(err.Error(), "sekr3t") {
			t.Fatalf("Open(%q) error %q shows the password", u, err)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("Open(%q) took %v", u, time.Since(start))
		}
	}
}

func TestOpenPrefixAndACL(t *testing.T) {
	raw := redistest.Need(t)
	ctx := ctxT(t)
	prefix := testPrefix(t, raw)

	// prefix from the URL, next to a go-redis option.
	u := redistest.URL()
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	s, err := Open(ctx, u+sep+"prefix="+prefix+"&dial_timeout=2s")
	must(t, err, "Open with ?prefix=")
	t.Cleanup(func() { _ = s.Close() })
	if s.prefix != prefix {
		t.Fatalf("prefix from URL = %q; want %q", s.prefix, prefix)
	}
	must(t, setErr(s.SetPartitions(ctx, "g", store.PartitionSet{Partitions: []store.Partition{{ID: "p"}}})), "SetPartitions")
	if n, _ := raw.Exists(ctx, s.keys("g").partitions).Result(); n != 1 || !strings.HasPrefix(s.keys("g").partitions, prefix+":{") {
		t.Fatalf("key %q not written", s.keys("g").partitions)
	}
	// WithPrefix wins over the URL.
	s2, err := Open(ctx, u+sep+"prefix=other", WithPrefix(prefix))
	must(t, err, "Open with ?prefix= and WithPrefix")
	defer s2.Close()
	if s2.prefix != prefix {
		t.Fatalf("prefix = %q; want WithPrefix's %q", s2.prefix, prefix)
	}

	// An ACL user limited to the prefix's keys.
	if !strings.HasPrefix(u, "redis://") || strings.Contains(u, "@") {
		t.Skip("ACL part needs a plain redis:// test URL without credentials")
	}
	user := "herdtest-user-" + redistest.RandomHex(4)
	pass := "p@ss:w/rd " + redistest.RandomHex(4)
	must(t, raw.Do(ctx, "ACL", "SETUSER", user, "on", ">"+pass, "~"+prefix+":*", "&*", "+@all", "-@dangerous", "+ping").Err(), "ACL SETUSER")
	t.Cleanup(func() { raw.Do(context.Background(), "ACL", "DELUSER", user) })
	host := strings.TrimPrefix(u, "redis://")
	authURL := "redis://" + user + ":" + urlEscape(pass) + "@" + host
	s3, err := Open(ctx, authURL, WithPrefix(prefix))
	must(t, err, "Open with ACL user")
	defer s3.Close()
	id, err := s3.OpenSession(ctx, "acl group", "m", 1, time.Minute)
	must(t, err, "OpenSession as ACL user")
	snap, err := s3.Snapshot(ctx, "acl group")
	must(t, err, "Snapshot as ACL user")
	_, err = store.Claim(ctx, s3, "acl group", "p", id)
	must(t, err, "Claim as ACL user")
	cs, _, err := s3.Changes(ctx, "acl group", snap.Version, 10)
	if err != nil || len(cs) != 1 || cs[0].Partition != "p" {
		t.Fatalf("Changes as ACL user: %+v, %v; want the claim of p", cs, err)
	}
	// The same user with another prefix is refused by the server.
	s4 := New(s3.client, WithPrefix("not-"+prefix))
	_, err = s4.OpenSession(ctx, "g", "m", 1, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("OpenSession outside the user's keys: %v; want a NOPERM error", err)
	}
	_, err = Open(ctx, "redis://"+user+":wrong@"+host)
	wantIs(t, err, store.ErrUnavailable, "Open with a wrong password")
	if strings.Contains(err.Error(), "wrong@") {
		t.Fatalf("error shows the password: %v", err)
	}
}

func urlEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func TestNewBadPrefix(t *testing.T) {
	raw := redistest.Need(t)
	ctx := ctxT(t)
	for _, p := range []string{"", "a{", "}", "new\nline", strings.Repeat("x", 257)} {
		s := New(raw, WithPrefix(p))
		_, err := s.OpenSession(ctx, "g", "m", 1, time.Second)
		wantIs(t, err, store.ErrInvalid, fmt.Sprintf("OpenSession on a store with prefix %q", p))
		_, _, err = s.Changes(ctx, "g", store.Version{}, 1)
		wantIs(t, err, store.ErrInvalid, fmt.Sprintf("Changes on a store with prefix %q", p))
	}
	_, err := New(nil).Snapshot(ctx, "g")
	wantIs(t, err, store.ErrInvalid, "Snapshot on New(nil)")
}

// TestKeysShareHashTag: every key of a group, whatever its id, has the
// same Redis Cluster hash tag, and different groups different tags.
func TestKeysShareHashTag(t *testing.T) {
	s := New(redis.NewClient(&redis.Options{}), WithPrefix("pre:fix"))
	defer s.client.Close()
	tags := map[string]string{}
	for _, g := range []string{"g", "{g}", "}{", "{", "}", "a:b", "with space", "日本", "{}", strings.Repeat("{x}", 170)} {
		k := s.keys(g)
		var tag string
		for i, name := range []string{k.sessions, k.members, k.partitions, k.owners, k.checkpoints, k.epochat, k.ckptat, k.partset, k.partlist, k.log, k.version} {
			open := strings.IndexByte(name, '{')
			close := strings.IndexByte(name[open+1:], '}')
			if open < 0 || close <= 0 {
				t.Fatalf("key %q of group %q has no hash tag", name, g)
			}
			got := name[open+1 : open+1+close]
			if i == 0 {
				tag = got
			} else if got != tag {
				t.Fatalf("group %q: key %q has tag %q; want %q like the others", g, name, got, tag)
			}
			if strings.Count(name, "{") != 1 || strings.Count(name, "}") != 1 {
				t.Fatalf("key %q has more than one brace pair", name)
			}
		}
		if other, dup := tags[tag]; dup {
			t.Fatalf("groups %q and %q share tag %q", g, other, tag)
		}
		tags[tag] = g
	}
}

// TestClaimRace: many sessions claim one partition at once; exactly one
// wins each round, with a new, higher epoch.
func TestClaimRace(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := ctxT(t)
	const group, n = "race", 16
	var last uint64
	for round := range 5 {
		sessions := make([]string, n)
		for i := range sessions {
			id, err := s.OpenSession(ctx, group, fmt.Sprintf("m%d", i), 1, time.Minute)
			must(t, err, "OpenSession")
			sessions[i] = id
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var wins []store.Ownership
		for _, id := range sessions {
			wg.Go(func() {
				o, err := store.Claim(ctx, s, group, "p", id)
				switch {
				case err == nil:
					mu.Lock()
					wins = append(wins, o)
					mu.Unlock()
				case errors.Is(err, store.ErrClaimed):
				default:
					t.Errorf("Claim: %v", err)
				}
			})
		}
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("round %d: %d winners %+v; want exactly 1", round, len(wins), wins)
		}
		if wins[0].Epoch <= last {
			t.Fatalf("round %d: epoch %d; want > %d", round, wins[0].Epoch, last)
		}
		last = wins[0].Epoch
		for _, id := range sessions {
			must(t, s.CloseSession(ctx, group, id), "CloseSession")
		}
	}
}

// TestFencing: after the owner's session closed and another took over, the
// old owner's writes are rejected and change nothing.
func TestFencing(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := ctxT(t)
	const g = "fencing"
	a, _ := s.OpenSession(ctx, g, "a", 1, time.Minute)
	b, _ := s.OpenSession(ctx, g, "b", 1, time.Minute)
	oa, err := store.Claim(ctx, s, g, "p", a)
	must(t, err, "Claim by a")
	must(t, s.Checkpoint(ctx, g, "p", oa.Epoch, []byte("a1")), "Checkpoint by a")
	_, err = store.Claim(ctx, s, g, "p", b)
	wantIs(t, err, store.ErrClaimed, "Claim by b of a's partition")
	must(t, s.CloseSession(ctx, g, a), "CloseSession a")
	wantIs(t, s.Checkpoint(ctx, g, "p", oa.Epoch, []byte("a2")), store.ErrNotOwner, "Checkpoint by closed a")
	ob, err := store.Claim(ctx, s, g, "p", b)
	must(t, err, "Claim by b")
	if ob.Epoch <= oa.Epoch || string(ob.Checkpoint) != "a1" || ob.Member != "b" {
		t.Fatalf("b's claim %+v; want epoch > %d, checkpoint a1, member b", ob, oa.Epoch)
	}
	wantIs(t, s.Checkpoint(ctx, g, "p", oa.Epoch, []byte("a3")), store.ErrNotOwner, "Checkpoint with a's epoch")
	wantIs(t, store.Release(ctx, s, g, "p", a, oa.Epoch), store.ErrNotOwner, "Release by a")
	wantIs(t, store.Release(ctx, s, g, "p", a, ob.Epoch), store.ErrNotOwner, "Release by a with b's epoch")
	wantIs(t, s.Checkpoint(ctx, g, "p", ob.Epoch+1, []byte("x")), store.ErrNotOwner, "Checkpoint with a future epoch")
	must(t, s.Checkpoint(ctx, g, "p", ob.Epoch, []byte("b1")), "Checkpoint by b")
	snap, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	if len(snap.Owners) != 1 || snap.Owners[0].Checkpoint != nil || snap.Owners[0].Epoch != ob.Epoch {
		t.Fatalf("owners %+v; want b's record, without its checkpoint", snap.Owners)
	}
	// A retried claim gets a fresh epoch and the checkpoint; the old epoch
	// is fenced.
	again, err := store.Claim(ctx, s, g, "p", b)
	must(t, err, "retried Claim")
	if again.Epoch <= ob.Epoch || string(again.Checkpoint) != "b1" {
		t.Fatalf("retried claim %+v; want an epoch above %d and checkpoint b1", again, ob.Epoch)
	}
	wantIs(t, s.Checkpoint(ctx, g, "p", ob.Epoch, []byte("b-old")), store.ErrNotOwner, "Checkpoint at the epoch before the retried claim")
	must(t, store.Release(ctx, s, g, "p", b, again.Epoch), "Release by b")
	wantIs(t, s.Checkpoint(ctx, g, "p", again.Epoch, []byte("b2")), store.ErrNotOwner, "Checkpoint after release")
	snap, _ = s.Snapshot(ctx, g)
	if o := snap.Owners[0]; o.Session != "" || o.Member != "" || o.Epoch != again.Epoch {
		t.Fatalf("released record %+v; want no session, epoch %d", o, again.Epoch)
	}
}

// TestEpochsFromServerClock: epochs are at least the server's time in µs
// and strictly increase even when claims come faster than 1 per µs would
// allow.
func TestEpochsFromServerClock(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "epochs"
	id, _ := s.OpenSession(ctx, g, "m", 1, time.Minute)
	before := serverMicros(t, raw)
	var last uint64
	for i := range 200 {
		o, err := store.Claim(ctx, s, g, "p", id)
		must(t, err, "Claim")
		if o.Epoch <= last || o.Epoch < before {
			t.Fatalf("claim %d: epoch %d; want > %d and >= server time %d", i, o.Epoch, last, before)
		}
		last = o.Epoch
		must(t, store.Release(ctx, s, g, "p", id, o.Epoch), "Release")
	}
	after := serverMicros(t, raw)
	if last > after+1000 {
		t.Fatalf("last epoch %d is far ahead of the server clock %d", last, after)
	}
}

// TestEpochsExact: epochs beyond 2^53 (where doubles lose integers) are
// compared and incremented exactly, and the uint64 limit is reported, not
// wrapped.
func TestEpochsExact(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "exact"
	k := s.keys(g)
	live, _ := s.OpenSession(ctx, g, "m", 1, time.Minute)
	for _, tc := range []struct{ prev, want string }{
		{"9007199254740993", "9007199254740994"}, // 2^53+1
		{"9999999999999999", "10000000000000000"},
		{"18446744073709551614", "18446744073709551615"},
	} {
		must(t, raw.HSet(ctx, k.owners, "p", tc.prev+"::").Err(), "HSET")
		o, err := store.Claim(ctx, s, g, "p", live)
		must(t, err, "Claim after "+tc.prev)
		if got := fmt.Sprint(o.Epoch); got != tc.want {
			t.Fatalf("Claim after epoch %s gave %s; want %s", tc.prev, got, tc.want)
		}
		// Fencing compares all digits: one less is stale.
		wantIs(t, s.Checkpoint(ctx, g, "p", o.Epoch-1, []byte("x")), store.ErrNotOwner, "Checkpoint with epoch-1")
		must(t, s.Checkpoint(ctx, g, "p", o.Epoch, []byte("y")), "Checkpoint with the epoch")
		snap, err := s.Snapshot(ctx, g)
		must(t, err, "Snapshot")
		if got := fmt.Sprint(snap.Owners[0].Epoch); got != tc.want {
			t.Fatalf("snapshot epoch %s; want %s", got, tc.want)
		}
		must(t, store.Release(ctx, s, g, "p", live, o.Epoch), "Release")
	}
	// At the limit, a claim cannot make a larger epoch.
	must(t, raw.HSet(ctx, k.owners, "p", "18446744073709551615::").Err(), "HSET")
	_, err := store.Claim(ctx, s, g, "p", live)
	wantIs(t, err, store.ErrCorrupt, "Claim at the largest epoch")
}

func TestCorruptRecords(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "corrupt"
	k := s.keys(g)
	id, _ := s.OpenSession(ctx, g, "m", 1, time.Minute)
	o, err := store.Claim(ctx, s, g, "p", id)
	must(t, err, "Claim")
	good, _ := raw.HGet(ctx, k.owners, "p").Result()

	for _, bad := range []string{"", "garbage", "0::", "01:x:", "-5::", "12", "12:", "18446744073709551616::", "1e5::", " 12::", "99999999999999999999999::"} {
		must(t, raw.HSet(ctx, k.owners, "p", bad).Err(), "HSET")
		snap, err := s.Snapshot(ctx, g)
		must(t, err, fmt.Sprintf("Snapshot with owners value %q (one bad record never fails the read)", bad))
		wantMalformed(t, snap, store.MalformedOwnership, "p", k.owners)
		_, err = store.Claim(ctx, s, g, "p", id)
		wantIs(t, err, store.ErrCorrupt, fmt.Sprintf("Claim with owners value %q", bad))
		if !strings.Contains(err.Error(), k.owners) || !strings.Contains(err.Error(), `"p"`) {
			t.Fatalf("error %q does not name key %q and field p", err, k.owners)
		}
		wantIs(t, store.Release(ctx, s, g, "p", id, o.Epoch), store.ErrCorrupt, "Release")
		wantIs(t, s.Checkpoint(ctx, g, "p", o.Epoch, nil), store.ErrCorrupt, "Checkpoint")
		// Other partitions still work.
		_, err = store.Claim(ctx, s, g, "q", id)
		must(t, err, "Claim of another partition")
	}
	must(t, raw.HSet(ctx, k.owners, "p", good).Err(), "HSET")
	must(t, raw.HDel(ctx, k.owners, "q").Err(), "HDEL")
	if _, err := s.Snapshot(ctx, g); err != nil {
		t.Fatalf("Snapshot after repair: %v", err)
	}

	// Member metadata.
	must(t, raw.HSet(ctx, k.members, id, "x:m").Err(), "HSET")
	snap, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot with a bad members value")
	wantMalformed(t, snap, store.MalformedSession, id, k.members)
	must(t, raw.HDel(ctx, k.members, id).Err(), "HDEL")
	snap, err = s.Snapshot(ctx, g)
	must(t, err, "Snapshot with a missing members value")
	wantMalformed(t, snap, store.MalformedSession, id, k.members)
	_, err = store.Claim(ctx, s, g, "r", id)
	wantIs(t, err, store.ErrCorrupt, "Claim by a session without members value")
	must(t, raw.HSet(ctx, k.members, id, "1:m").Err(), "HSET")

	// Partition weights.
	must(t, raw.HSet(ctx, k.partitions, "p", "heavy").Err(), "HSET")
	snap, err = s.Snapshot(ctx, g)
	must(t, err, "Snapshot with a bad weight")
	wantMalformed(t, snap, store.MalformedPartition, "p", k.partitions)
	must(t, raw.Del(ctx, k.partitions).Err(), "DEL")

	// A key of the wrong type.
	must(t, raw.Del(ctx, k.sessions).Err(), "DEL")
	must(t, raw.Set(ctx, k.sessions, "not a zset", 0).Err(), "SET")
	_, err = s.Snapshot(ctx, g)
	wantIs(t, err, store.ErrCorrupt, "Snapshot with a string sessions key")
	wantIs(t, keepErr(s.KeepAlive(ctx, g, id, time.Minute)), store.ErrCorrupt, "KeepAlive with a string sessions key")
	_, err = s.OpenSession(ctx, g, "m", 1, time.Minute)
	wantIs(t, err, store.ErrCorrupt, "OpenSession with a string sessions key")
}

// TestCheckpointBytes: checkpoints are binary safe and limited in size.
func TestCheckpointBytes(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := ctxT(t)
	const g = "bytes"
	id, _ := s.OpenSession(ctx, g, "m", 1, time.Minute)
	o, _ := store.Claim(ctx, s, g, "p", id)
	all := make([]byte, 256*3)
	for i := range all {
		all[i] = byte(i)
	}
	for _, v := range [][]byte{all, []byte("\x00"), []byte("a:b:c\n"), bytes.Repeat([]byte{0xff}, store.MaxCheckpointLength)} {
		must(t, s.Checkpoint(ctx, g, "p", o.Epoch, v), "Checkpoint")
		again, err := store.Claim(ctx, s, g, "p", id)
		must(t, err, "Claim")
		if !bytes.Equal(again.Checkpoint, v) {
			t.Fatalf("checkpoint of %d bytes did not round-trip", len(v))
		}
		o = again
	}
	wantIs(t, s.Checkpoint(ctx, g, "p", o.Epoch, make([]byte, store.MaxCheckpointLength+1)), store.ErrInvalid, "Checkpoint over the limit")
	// An empty checkpoint is kept as empty; a new owner gets it back.
	must(t, s.Checkpoint(ctx, g, "p", o.Epoch, nil), "empty Checkpoint")
	must(t, store.Release(ctx, s, g, "p", id, o.Epoch), "Release")
	o2, err := store.Claim(ctx, s, g, "p", id)
	must(t, err, "Claim")
	if o2.Checkpoint == nil || len(o2.Checkpoint) != 0 {
		t.Fatalf("checkpoint after empty write = %#v; want empty, not nil", o2.Checkpoint)
	}
	// No checkpoint yet: nil.
	o3, _ := store.Claim(ctx, s, g, "fresh", id)
	if o3.Checkpoint != nil {
		t.Fatalf("checkpoint of a fresh partition = %#v; want nil", o3.Checkpoint)
	}
}

// TestExpiryLogged: a session that is not renewed expires by the server's
// clock, and the next KeepAlive of another member logs it.
func TestExpiryLogged(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := ctxT(t)
	const g = "expiry"
	live, _ := s.OpenSession(ctx, g, "live", 1, time.Minute)
	short, _ := s.OpenSession(ctx, g, "short", 2, 300*time.Millisecond)
	o, err := store.Claim(ctx, s, g, "p", short)
	must(t, err, "Claim")
	snap, _ := s.Snapshot(ctx, g)
	for _, si := range snap.Sessions {
		if si.ID == short && (si.Remaining <= 0 || si.Remaining > 300*time.Millisecond || si.Weight != 2 || si.Member != "short") {
			t.Fatalf("session info %+v", si)
		}
	}
	time.Sleep(400 * time.Millisecond)
	must(t, keepErr(s.KeepAlive(ctx, g, live, time.Minute)), "KeepAlive of the live session")
	if cs, _, err := s.Changes(ctx, g, snap.Version, 10); err != nil || len(cs) != 1 || cs[0].Kind != store.SessionExpired || cs[0].Session != short {
		t.Fatalf("the log after the KeepAlive: %+v, %v; want the expiry of %s", cs, err, short)
	}
	wantIs(t, keepErr(s.KeepAlive(ctx, g, short, time.Minute)), store.ErrSessionExpired, "KeepAlive of the expired session")
	wantIs(t, s.Checkpoint(ctx, g, "p", o.Epoch, []byte("late")), store.ErrNotOwner, "Checkpoint of an expired owner")
	o2, err := store.Claim(ctx, s, g, "p", live)
	must(t, err, "Claim of the expired owner's partition")
	if o2.Epoch <= o.Epoch {
		t.Fatalf("epoch %d after takeover; want > %d", o2.Epoch, o.Epoch)
	}
	_, err = store.Claim(ctx, s, g, "q", short)
	wantIs(t, err, store.ErrSessionExpired, "Claim by an expired session")
}

// TestClose: Close returns and later calls fail.
func TestClose(t *testing.T) {
	raw := redistest.Need(t)
	s := openWithPrefix(t, testPrefix(t, raw))
	ctx := ctxT(t)
	done := make(chan struct{})
	go func() { _ = s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	_, err := s.Snapshot(ctx, "a")
	wantIs(t, err, store.ErrUnavailable, "Snapshot after Close")
	_, _, err = s.Changes(ctx, "a", store.Version{}, 1)
	wantIs(t, err, store.ErrUnavailable, "Changes after Close")
	must(t, s.Close(), "second Close")
}

// TestContextErrors: a cancelled context gives an error that is both
// ErrUnavailable and the context's error.
func TestContextErrors(t *testing.T) {
	s, _ := newTestStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Snapshot(ctx, "g")
	wantIs(t, err, store.ErrUnavailable, "Snapshot with cancelled ctx")
	wantIs(t, err, context.Canceled, "Snapshot with cancelled ctx")
	_, _, err = s.Changes(ctx, "g", store.Version{}, 1)
	wantIs(t, err, context.Canceled, "Changes with cancelled ctx")

	// A deadline that passes while the server is busy.
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	time.Sleep(2 * time.Millisecond)
	err = keepErr(s.KeepAlive(ctx2, "g", "s", time.Second))
	wantIs(t, err, store.ErrUnavailable, "KeepAlive past deadline")
	wantIs(t, err, context.DeadlineExceeded, "KeepAlive past deadline")
}

// TestOpenSessionRetried: the open script is idempotent for its own id, so
// a client retry after a lost reply does not fail or open two sessions.
func TestOpenSessionRetried(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := ctxT(t)
	k := s.keys("g")
	for i, meta := range []string{"1:m", "1:m", "2:other"} {
		status, _, err := s.runLogged(ctx, "open", openScript, k, []string{k.sessions, k.members}, "FIXEDIDFIXEDIDFIXEDIDFIXED", "60000000", meta)
		must(t, err, "open script")
		want := "ok"
		if i == 2 {
			want = "dup"
		}
		if status != want {
			t.Fatalf("call %d: status %q; want %q", i, status, want)
		}
	}
	snap, _ := s.Snapshot(ctx, "g")
	if len(snap.Sessions) != 1 || snap.Sessions[0].Member != "m" {
		t.Fatalf("sessions %+v; want one of member m", snap.Sessions)
	}
}

// TestGroupKeysLost: deleting a group's keys (what FLUSHALL or a restart
// without persistence does) loses sessions and records, but epochs handed
// out afterwards are still greater than every earlier one.
func TestGroupKeysLost(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "lost"
	id, _ := s.OpenSession(ctx, g, "m", 1, time.Minute)
	var maxEpoch uint64
	for i := range 50 {
		p := fmt.Sprint("p", i%3)
		o, err := store.Claim(ctx, s, g, p, id)
		must(t, err, "Claim")
		maxEpoch = o.Epoch
		must(t, store.Release(ctx, s, g, p, id, o.Epoch), "Release")
	}
	k := s.keys(g)
	must(t, raw.Del(ctx, k.sessions, k.members, k.partitions, k.owners, k.checkpoints, k.epochat, k.ckptat, k.partset).Err(), "DEL")
	wantIs(t, keepErr(s.KeepAlive(ctx, g, id, time.Minute)), store.ErrSessionExpired, "KeepAlive after loss")
	id2, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession")
	if id2 == id {
		t.Fatal("session id reused after data loss")
	}
	for i := range 3 {
		o, err := store.Claim(ctx, s, g, fmt.Sprint("p", i), id2)
		must(t, err, "Claim after loss")
		if o.Epoch <= maxEpoch {
			t.Fatalf("epoch after loss %d; want > %d", o.Epoch, maxEpoch)
		}
	}
}

// TestServerRestart runs a private redis-server, restarts it empty in the
// middle, and checks what a member sees: its session is gone, the feed
// resyncs, and epochs keep increasing.
func TestServerRestart(t *testing.T) {
	redistest.Need(t) // honours HERD_REQUIRE_SERVERS
	ts := redistest.StartServer(t)
	ctx := ctxT(t)
	s, err := Open(ctx, ts.URL()+"?dial_timeout=1s")
	must(t, err, "Open")
	defer s.Close()
	const g = "restart"
	id, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession")
	var maxEpoch uint64
	for i := range 100 {
		p := fmt.Sprint("p", i%4)
		o, err := store.Claim(ctx, s, g, p, id)
		must(t, err, "Claim")
		maxEpoch = o.Epoch
		must(t, store.Release(ctx, s, g, p, id, o.Epoch), "Release")
	}
	o, err := store.Claim(ctx, s, g, "kept", id)
	must(t, err, "Claim")
	maxEpoch = o.Epoch
	before, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")

	ts.Restart()

	// The pool's connections died with the server; calls recover.
	var kerr error
	for range 50 {
		kerr = keepErr(s.KeepAlive(ctx, g, id, time.Minute))
		if !errors.Is(kerr, store.ErrUnavailable) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantIs(t, kerr, store.ErrSessionExpired, "KeepAlive after the restart")
	wantIs(t, s.Checkpoint(ctx, g, "kept", o.Epoch, []byte("x")), store.ErrNotOwner, "Checkpoint after the restart")
	id2, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession after the restart")
	if id2 == id {
		t.Fatal("session id repeated after the restart")
	}
	// The log is a new history: a reader of the old one reads anew.
	_, _, err = s.Changes(ctx, g, before.Version, 10)
	wantIs(t, err, store.ErrVersionGone, "Changes after the restart, from a version before it")
	for _, p := range []string{"kept", "p0", "new"} {
		o, err := store.Claim(ctx, s, g, p, id2)
		must(t, err, "Claim after the restart")
		if o.Epoch <= maxEpoch {
			t.Fatalf("epoch of %s after the restart %d; want > %d (every epoch before)", p, o.Epoch, maxEpoch)
		}
	}

	// Server down: calls fail with ErrUnavailable, promptly.
	ts.Kill()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = s.Snapshot(sctx, g)
	wantIs(t, err, store.ErrUnavailable, "Snapshot with the server down")
	// And the store works again once it is back.
	ts.Start()
	var serr error
	for range 50 {
		if _, serr = s.Snapshot(ctx, g); serr == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	must(t, serr, "Snapshot once the server is back")
}

// Benchmarks of the steady-state operations (one round trip each).

func benchStore(b *testing.B) (*Store, context.Context, string) {
	s, _ := newTestStore(b)
	ctx := context.Background()
	const g = "bench"
	id, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	return s, ctx, id
}

func BenchmarkKeepAlive(b *testing.B) {
	s, ctx, id := benchStore(b)
	for b.Loop() {
		if err := keepErr(s.KeepAlive(ctx, "bench", id, time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckpoint(b *testing.B) {
	s, ctx, id := benchStore(b)
	o, err := store.Claim(ctx, s, "bench", "p", id)
	if err != nil {
		b.Fatal(err)
	}
	v := bytes.Repeat([]byte("x"), 64)
	for b.Loop() {
		if err := s.Checkpoint(ctx, "bench", "p", o.Epoch, v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClaimRelease(b *testing.B) {
	s, ctx, id := benchStore(b)
	for b.Loop() {
		o, err := store.Claim(ctx, s, "bench", "p", id)
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Release(ctx, s, "bench", "p", id, o.Epoch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshot100 reads a group of 10 sessions and 100 owned partitions.
func BenchmarkSnapshot100(b *testing.B) {
	s, ctx, _ := benchStore(b)
	ps := make([]store.Partition, 100)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprint("p", i)}
	}
	if _, err := s.SetPartitions(ctx, "bench", store.PartitionSet{Partitions: ps}); err != nil {
		b.Fatal(err)
	}
	for i := range 10 {
		id, _ := s.OpenSession(ctx, "bench", fmt.Sprint("m", i), 1, time.Minute)
		for j := i; j < 100; j += 10 {
			o, err := store.Claim(ctx, s, "bench", ps[j].ID, id)
			if err != nil {
				b.Fatal(err)
			}
			_ = s.Checkpoint(ctx, "bench", ps[j].ID, o.Epoch, []byte("offset-123456"))
		}
	}
	for b.Loop() {
		if _, err := s.Snapshot(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLogTrimmed(t *testing.T) {
	raw := redistest.Need(t)
	s := openWithPrefix(t, testPrefix(t, raw), WithLogLimit(10))
	storetest.RunTrim(t, s, 10)
}
