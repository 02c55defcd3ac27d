package storetest

import (
	"bytes"
	"fmt"
	"time"

	"github.com/herdhq/herd/store"
)

// testInvalidArguments: every backend rejects the same bad arguments with
// ErrInvalid and changes nothing: epoch 0 (epochs start at 1), malformed
// session ids, negative weights, TTLs <= 0, oversized checkpoints, and
// malformed ids in Restore. (Malformed group, member and partition ids in
// the other methods are testMalformedIDs'.) A backend that accepted one of
// these would write a record that the others, or its own later reads,
// cannot use: Restore at epoch 0 did exactly that.
func testInvalidArguments(e *env) {
	t := e.t
	s := e.open("member", longTTL)
	e.setPartitions("p")
	o := e.claim("p", s)
	ctx := e.ctx
	big := bytes.Repeat([]byte{'x'}, store.MaxCheckpointLength+1)
	calls := map[string]func() error{
		"Restore at epoch 0":    func() error { return e.s.Restore(ctx, e.group, "q", 0, []byte("x")) },
		"Checkpoint at epoch 0": func() error { return e.s.Checkpoint(ctx, e.group, "p", 0, []byte("x")) },
		"Release at epoch 0":    func() error { return store.Release(ctx, e.s, e.group, "p", s, 0) },
		"GiveBack at epoch 0":   func() error { return e.s.GiveBack(ctx, e.group, "p", s, 0) },
		"Restore of an oversized checkpoint": func() error {
			return e.s.Restore(ctx, e.group, "q", 5, big)
		},
		"Checkpoint of an oversized checkpoint": func() error {
			return e.s.Checkpoint(ctx, e.group, "p", o.Epoch, big)
		},
		"OpenSession with weight -1": func() error { _, err := e.s.OpenSession(ctx, e.group, "m", -1, time.Second); return err },
		"OpenSession with TTL 0":     func() error { _, err := e.s.OpenSession(ctx, e.group, "m", 1, 0); return err },
		"OpenSession with TTL -1s":   func() error { _, err := e.s.OpenSession(ctx, e.group, "m", 1, -time.Second); return err },
		"KeepAlive with TTL 0":       func() error { return keepErr(e.s.KeepAlive(ctx, e.group, s, 0)) },
		"KeepAlive with TTL -1s":     func() error { return keepErr(e.s.KeepAlive(ctx, e.group, s, -time.Second)) },
		"SetPartitions with weight -1": func() error {
			_, err := e.s.SetPartitions(ctx, e.group, store.PartitionSet{Partitions: []store.Partition{{ID: "p", Weight: -1}}})
			return err
		},
		"Changes with max 0": func() error { _, _, err := e.s.Changes(ctx, e.group, store.Version{}, 0); return err },
		"ReleaseBatch at epoch 0": func() error {
			_, err := e.s.ReleaseBatch(ctx, e.group, s, []store.Ownership{{Partition: "p"}})
			return err
		},
	}
	for _, bad := range malformedIDs() {
		calls["Restore(group "+quote(bad)+")"] = func() error { return e.s.Restore(ctx, bad, "q", 5, nil) }
		calls["Restore(partition "+quote(bad)+")"] = func() error { return e.s.Restore(ctx, e.group, bad, 5, nil) }
		calls["KeepAlive(session "+quote(bad)+")"] = func() error { return keepErr(e.s.KeepAlive(ctx, e.group, bad, time.Second)) }
		calls["CloseSession(session "+quote(bad)+")"] = func() error { return e.s.CloseSession(ctx, e.group, bad) }
		calls["Claim(session "+quote(bad)+")"] = func() error { _, err := store.Claim(ctx, e.s, e.group, "p", bad); return err }
		calls["Release(session "+quote(bad)+")"] = func() error { return store.Release(ctx, e.s, e.group, "p", bad, o.Epoch) }
		calls["GiveBack(session "+quote(bad)+")"] = func() error { return e.s.GiveBack(ctx, e.group, "p", bad, o.Epoch) }
		calls["Changes(group "+quote(bad)+")"] = func() error { _, _, err := e.s.Changes(ctx, bad, store.Version{}, 1); return err }
		calls["ExpireSessions(group "+quote(bad)+")"] = func() error { _, err := e.s.ExpireSessions(ctx, bad); return err }
		calls["ClaimBatch(group "+quote(bad)+")"] = func() error { _, err := e.s.ClaimBatch(ctx, bad, s, []string{"p"}); return err }
		calls["ClaimBatch(session "+quote(bad)+")"] = func() error { _, err := e.s.ClaimBatch(ctx, e.group, bad, []string{"p"}); return err }
		calls["ClaimBatch(partition "+quote(bad)+")"] = func() error { _, err := e.s.ClaimBatch(ctx, e.group, s, []string{"p", bad}); return err }
		calls["ReleaseBatch(group "+quote(bad)+")"] = func() error {
			_, err := e.s.ReleaseBatch(ctx, bad, s, []store.Ownership{{Partition: "p", Epoch: o.Epoch}})
			return err
		}
		calls["ReleaseBatch(session "+quote(bad)+")"] = func() error {
			_, err := e.s.ReleaseBatch(ctx, e.group, bad, []store.Ownership{{Partition: "p", Epoch: o.Epoch}})
			return err
		}
		calls["ReleaseBatch(partition "+quote(bad)+")"] = func() error {
			_, err := e.s.ReleaseBatch(ctx, e.group, s, []store.Ownership{{Partition: bad, Epoch: o.Epoch}})
			return err
		}
	}
	before := e.snap().Version
	for name, call := range calls {
		wantErr(t, call(), store.ErrInvalid, name, "every backend rejects this argument")
	}
	snap := e.snap()
	if !snap.Alive(s) || len(snap.Sessions) != 1 {
		t.Fatalf("after rejected calls the sessions are %+v; want only %q, alive", snap.Sessions, s)
	}
	if got := partitionIDs(snap.Partitions); len(got) != 1 || got[0] != "p" {
		t.Fatalf("after rejected calls the partition set is %q; want [p]", got)
	}
	if got, _ := findOwner(snap, "p"); !sameOwner(got, o) || len(snap.Owners) != 1 {
		t.Fatalf("after rejected calls the records are %+v; want only %s", snap.Owners, fmtOwner(o))
	}
	// Nothing was logged either: the next entry is the one made now.
	e.release("p", s, o.Epoch)
	if cs := e.readLog(before, e.snap().Version); len(cs) != 1 || cs[0].Kind != store.Released || cs[0].Partition != "p" {
		t.Fatalf("the log after rejected calls and one release: %+v; want only the release of p", cs)
	}
	e.wantCheckpoint("p", s, "", fmt.Sprintf("after rejected calls (the record's epoch was %d)", o.Epoch))
}
