package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// DeleteGroup leaves no key of the group in Redis, including a key under the
// group's hash tag that this version does not write, and no key of another
// group is touched.
func TestDeleteGroupLeavesNoKey(t *testing.T) {
	s, raw := newTestStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, g := range []string{"g*1", "g*10"} { // '*' must not match as a glob
		must(t, setErr(s.SetPartitions(ctx, g, store.PartitionSet{Partitions: []store.Partition{{ID: "a"}}})), "SetPartitions")
		sess, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
		must(t, err, "OpenSession")
		o, err := store.Claim(ctx, s, g, "a", sess)
		must(t, err, "Claim")
		must(t, s.Checkpoint(ctx, g, "a", o.Epoch, []byte("x")), "Checkpoint")
		must(t, s.CloseSession(ctx, g, sess), "CloseSession")
	}
	k := s.keys("g*1")
	extra := strings.TrimSuffix(k.sessions, "sessions") + "future-log"
	must(t, raw.Set(ctx, extra, "x", 0).Err(), "SET")

	otherBase := strings.TrimSuffix(s.keys("g*10").sessions, "sessions")
	others, err := raw.Keys(ctx, otherBase+"*").Result()
	must(t, err, "KEYS")
	if len(others) == 0 {
		t.Fatal("the other group has no key")
	}

	must(t, s.DeleteGroup(ctx, "g*1", false), "DeleteGroup")
	left, err := raw.Keys(ctx, s.prefix+":*").Result()
	must(t, err, "KEYS")
	for _, key := range left {
		if !strings.HasPrefix(key, otherBase) {
			t.Errorf("key %q is left after DeleteGroup", key)
		}
	}
	if len(left) != len(others) {
		t.Errorf("the other group has %d keys after DeleteGroup of the first, want its %d: %q", len(left), len(others), left)
	}
}
