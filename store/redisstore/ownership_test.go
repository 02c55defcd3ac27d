package redisstore

// Claims, fencing, epochs, corrupt records and checkpoints against a real Redis.

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

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
