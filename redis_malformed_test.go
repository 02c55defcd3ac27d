package herd_test

import (
	"context"
	"encoding/base64"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store/redisstore"
)

// redisFleet runs members of one group of 16 partitions on the real Redis,
// under a key prefix of its own, logging into one logLines.
type redisFleet struct {
	t      *testing.T
	ctx    context.Context
	raw    *redis.Client
	st     *redisstore.Store
	owners string // the group's owners key (see redisstore's doc)
	logs   *logLines
	ms     []*herd.Member
}

func newRedisFleet(t *testing.T) *redisFleet {
	raw := redistest.Need(t)
	prefix := redistest.Prefix(t, raw, "herdtest-member")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	st, err := redisstore.Open(ctx, redistest.URL(), redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	const group = "g"
	return &redisFleet{
		t: t, ctx: ctx, raw: raw, st: st, logs: &logLines{},
		owners: prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(group)) + "}:owners",
	}
}

func (f *redisFleet) join(id string) *herd.Member {
	f.t.Helper()
	m, err := herd.Join(f.ctx, f.st, herd.Config{
		Group: "g", Member: id, Partitions: herd.Numbered(16), SessionTTL: 2 * time.Second,
		// A member that neither owns nor claims the broken record learns of
		// it at its slow full read.
		ResyncInterval: 500 * time.Millisecond,
		Logger:         slog.New(f.logs).With("member", id),
		Handler:        func(c *herd.Claim) error { <-c.Context().Done(); return nil },
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.ms = append(f.ms, m)
	return m
}

func (f *redisFleet) owned() (all []string) {
	for _, m := range f.ms {
		all = append(all, m.Owned()...)
	}
	slices.Sort(all)
	return all
}

// waitFor polls cond until it holds, for at most 20 s.
func (f *redisFleet) waitFor(what string, cond func() bool) time.Duration {
	f.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 20*time.Second {
			f.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

func (f *redisFleet) leave() {
	f.t.Helper()
	for _, m := range f.ms {
		if err := m.Leave(f.ctx); err != nil {
			f.t.Fatal(err)
		}
	}
}

// TestRedisCorruptOwnersKey: on the real Redis, the owners key replaced by
// a string (every read of the group fails with WRONGTYPE) makes each member
// log it once while it retries with back-off, not on every attempt; when the
// key is repaired (deleted), the members place every partition again.
func TestRedisCorruptOwnersKey(t *testing.T) {
	f := newRedisFleet(t)
	f.join("a")
	f.join("b")
	f.waitFor("16 partitions placed", func() bool { return len(f.owned()) == 16 })
	if err := f.raw.Del(f.ctx, f.owners).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.raw.Set(f.ctx, f.owners, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	f.join("c") // every member reads the group, and fails
	time.Sleep(6 * time.Second)
	n, line := f.logs.count(slog.LevelWarn, "cannot be read")
	all, last := f.logs.count(slog.LevelWarn)
	t.Logf("owners key a string for 6 s: %d WARN lines in all from 3 members, %d of them about the unreadable group", all, n)
	if n > 3 {
		t.Errorf("%d WARN lines about the unreadable group from 3 members in 6 s (last: %q); want at most one per member", n, line)
	}
	if all > 3 {
		t.Errorf("%d WARN lines in all in 6 s (last: %q); want no flood", all, last)
	}
	if err := f.raw.Del(f.ctx, f.owners).Err(); err != nil {
		t.Fatal(err)
	}
	f.waitFor("16 partitions placed again after the repair", func() bool { return len(f.owned()) == 16 })
	f.leave()
}

// TestRedisMalformedOwnerRecord: on the real Redis, one field of the owners
// hash overwritten with garbage costs its own partition only: a member that
// joins afterwards gets its share at once, the fleet runs the 15 other
// partitions, and each member reports the record once. (Before, every
// Snapshot failed: the newcomer got nothing until the record was repaired.)
func TestRedisMalformedOwnerRecord(t *testing.T) {
	f := newRedisFleet(t)
	f.join("a")
	f.join("b")
	f.waitFor("16 partitions placed", func() bool { return len(f.owned()) == 16 })
	if err := f.raw.HSet(f.ctx, f.owners, "5", "garbage").Err(); err != nil {
		t.Fatal(err)
	}
	c := f.join("c")
	took := f.waitFor("the newcomer to run its share", func() bool { return len(c.Owned()) >= 5 })
	t.Logf("with one garbage owners field, the newcomer ran %d partitions %v after joining", len(c.Owned()), took.Round(time.Millisecond))
	want := []string{"0", "1", "10", "11", "12", "13", "14", "15", "2", "3", "4", "6", "7", "8", "9"}
	f.waitFor("the 15 good partitions placed", func() bool { return slices.Equal(f.owned(), want) })
	time.Sleep(time.Second) // more reads
	if n, line := f.logs.count(slog.LevelWarn, "malformed", `id="5"`); n != 3 {
		t.Errorf("%d WARN lines report the malformed record (last: %q); want one per member", n, line)
	}
	if got := f.owned(); !slices.Equal(got, want) {
		t.Errorf("the fleet runs %v; want %v", got, want)
	}
	f.leave()
}

// TestRedisSessionAddedByHand: a session added to the group by hand, with a
// well-formed member record, is not given partitions it would never claim:
// its id is not one the store makes, so it is a malformed record, reported
// once by each member. (Before, the members gave it its share, which stayed
// stranded, without a log line.)
func TestRedisSessionAddedByHand(t *testing.T) {
	f := newRedisFleet(t)
	sessions := strings.TrimSuffix(f.owners, "owners") + "sessions"
	members := strings.TrimSuffix(f.owners, "owners") + "members"
	if err := f.raw.ZAdd(f.ctx, sessions, redis.Z{Score: 9e15, Member: "by-hand"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.raw.HSet(f.ctx, members, "by-hand", "1:ghost").Err(); err != nil {
		t.Fatal(err)
	}
	f.join("a")
	f.join("b")
	took := f.waitFor("16 partitions placed", func() bool { return len(f.owned()) == 16 })
	t.Logf("all 16 partitions placed %v after the members joined, next to a session added by hand", took.Round(time.Millisecond))
	if n, line := f.logs.count(slog.LevelWarn, "malformed", `id="by-hand"`); n != 2 {
		t.Errorf("%d WARN lines report the session added by hand (last: %q); want one per member", n, line)
	}
	f.leave()
}
