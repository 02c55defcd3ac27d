package herd_test

import (
	"context"
	"encoding/base64"
	"log/slog"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store/redisstore"
)

// TestRedisCorruptOwnersKey: on the real Redis, the owners key replaced by
// a string (every read of the group fails with WRONGTYPE) makes each member
// log it once while it retries with back-off, not on every attempt; when the
// key is repaired (deleted), the members place every partition again.
func TestRedisCorruptOwnersKey(t *testing.T) {
	raw := redistest.Need(t)
	prefix := redistest.Prefix(t, raw, "herdtest-member")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st, err := redisstore.Open(ctx, redistest.URL(), redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const group = "corrupt"
	owners := prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(group)) + "}:owners" // see redisstore's doc
	logs := &logLines{}
	join := func(id string) *herd.Member {
		m, err := herd.Join(ctx, st, herd.Config{
			Group: group, Member: id, Partitions: herd.Numbered(16), SessionTTL: 2 * time.Second,
			Logger:  slog.New(logs).With("member", id),
			Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	owned := func(ms ...*herd.Member) (n int) {
		for _, m := range ms {
			n += len(m.Owned())
		}
		return n
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	a, b := join("a"), join("b")
	waitFor("16 partitions placed", func() bool { return owned(a, b) == 16 })

	if err := raw.Del(ctx, owners).Err(); err != nil {
		t.Fatal(err)
	}
	if err := raw.Set(ctx, owners, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	c := join("c") // every member reads the group, and fails
	time.Sleep(6 * time.Second)
	n, line := logs.count(slog.LevelWarn, "cannot be read")
	all, last := logs.count(slog.LevelWarn)
	t.Logf("owners key a string for 6 s: %d WARN lines in all from 3 members, %d of them about the unreadable group", all, n)
	if n > 3 {
		t.Errorf("%d WARN lines about the unreadable group from 3 members in 6 s (last: %q); want at most one per member", n, line)
	}
	if all > 3+16 { // one per member, and at most one per partition lost by its handler's failed release
		t.Errorf("%d WARN lines in all in 6 s (last: %q); want no flood", all, last)
	}
	if err := raw.Del(ctx, owners).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor("16 partitions placed again after the repair", func() bool { return owned(a, b, c) == 16 })
	for _, m := range []*herd.Member{a, b, c} {
		if err := m.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
