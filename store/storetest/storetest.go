// Package storetest is the conformance suite of the store contract. Every
// backend runs it against its real server:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s := redisstore.New(...)
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite checks that every backend rejects the same bad arguments with
// ErrInvalid (invalid.go). It cannot write records a backend did not write
// itself, so tolerating malformed records (Snapshot.Malformed) is tested by
// each backend that can hold them, with its raw client (redisstore's
// malformed_test.go).
//
// Records (records.go) is checked for order, fields and checkpoints, and
// its ages against the local clock within a tolerance.
//
// The log (log.go) is checked through the contract alone: ordered and
// gap-free under concurrent writers, a snapshot plus the entries after it
// equals a later snapshot (a seeded property test), ErrVersionGone,
// expiries logged once, a batch giving each partition what a batch of one
// (store.Claim, store.Release) gives. Trimming needs a
// store made with a small log bound, which only the backend can make:
// backends call RunTrim with one.
//
// Every subtest works in its own group with a random name, so backends that
// share one server (or one suite run against a server used by someone else)
// do not collide, and the subtests run in parallel. The suite runs in real
// time: the few subtests that need a session to expire use TTLs of half a
// second and poll the snapshot with a deadline; the whole suite takes a few
// seconds.
package storetest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

const (
	// shortTTL is the TTL of sessions the suite lets expire.
	shortTTL = 500 * time.Millisecond
	// longTTL is the TTL of sessions that must stay alive for a whole subtest.
	longTTL = time.Minute
	// expiryGrace is how long after its TTL a session may still be seen
	// alive (store clock rate, polling, a loaded CI machine).
	expiryGrace = 2 * time.Second
	// eventWait is how long a change may take to reach a reader of the log.
	eventWait = 3 * time.Second
	// promptly is how long a call with a cancelled context may take.
	promptly = 2 * time.Second
	// subtestTimeout bounds every store call of one subtest.
	subtestTimeout = 30 * time.Second
	// pollEvery is the interval of condition polling.
	pollEvery = 20 * time.Millisecond
)

// Run runs the conformance suite. newStore is called once per subtest (with
// the subtest's t, so it can register cleanup with t.Cleanup) and must return
// a working store; stores may share a server, since every subtest uses its
// own randomly named group. Subtests run in parallel; Run returns when all of
// them have finished. Run never calls Close: newStore registers that with
// t.Cleanup if it wants to. The groups the suite creates are left in the
// store (the contract has no way to delete one); their sessions expire.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	RunWith(t, Options{}, newStore)
}

// Options are what a backend tells the suite about itself.
type Options struct {
	// ExpiryLag is how long after its TTL a session may still be alive in
	// the store, when the store counts TTLs coarser than the suite's
	// (etcd grants leases in whole seconds and ends them on a 500 ms
	// tick): subtests that expect an expiry at the TTL wait that much
	// longer. 0 for a store that ends a session at its TTL.
	ExpiryLag time.Duration
}

// RunWith is Run with the backend's Options.
func RunWith(t *testing.T, opts Options, newStore func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(e *env)
	}{
		// sessions.go
		{"session/open_keepalive_close", testSessionLifecycle},
		{"session/ids_unique", testSessionIDsUnique},
		{"session/keepalive_unknown", testKeepAliveUnknown},
		{"session/expires_after_ttl", testSessionExpires},
		{"session/keepalive_extends", testKeepAliveExtends},
		{"session/invalid_arguments", testSessionInvalidArguments},
		// ownership.go
		{"claim/free_partition", testClaimFree},
		{"claim/held_by_live_session", testClaimHeld},
		{"claim/by_owner_gets_fresh_epoch", testClaimByOwner},
		{"claim/needs_live_session", testClaimNeedsLiveSession},
		{"claim/after_owner_closed", testClaimAfterClose},
		{"claim/after_owner_expired", testClaimAfterExpiry},
		{"checkpoint/current_epoch", testCheckpointCurrent},
		{"checkpoint/fenced", testCheckpointFenced},
		{"checkpoint/size_limit", testCheckpointLimit},
		{"release/fenced", testReleaseFenced},
		{"release/keeps_checkpoint_and_epoch", testReleaseKeeps},
		// giveback.go
		{"giveback/fenced", testGiveBackFenced},
		{"giveback/mark", testGiveBackMark},
		{"epoch/strictly_increases", testEpochsIncrease},
		{"restore/only_where_no_record", testRestore},
		{"partitions/set_replaces", testSetPartitions},
		{"partitions/invalid_set_rejected", testSetPartitionsInvalid},
		// partset.go
		{"partitions/group_kind", testGroupKind},
		{"partitions/digest_skips_equal_set", testSetDigest},
		{"partitions/same_set_at_once_written_once", testSetDigestRace},
		{"snapshot/empty_group", testSnapshotEmpty},
		{"snapshot/sorted_with_fields", testSnapshotSorted},
		{"snapshot/sees_every_change", testSnapshotSeesChanges},
		{"group/independent", testGroupsIndependent},
		// ids.go
		{"ids/unusual_accepted", testUnusualIDs},
		{"ids/malformed_rejected", testMalformedIDs},
		{"context/cancelled", testCancelledContext},
		{"context/nil", testNilContext}, // nilctx.go
		// invalid.go
		{"arguments/invalid_rejected_alike", testInvalidArguments},
		// concurrency.go
		{"concurrency/claim_race_new_records", testClaimRaceNew},
		{"concurrency/claim_race_freed_record", testClaimRaceFreed},
		{"concurrency/stale_checkpoints", testStaleCheckpoints},
		// log.go
		{"log/gap_free_under_concurrent_writers", testLogGapFree},
		{"log/replica_equals_snapshot", testLogReplicaProperty},
		{"log/version_gone", testLogVersionGone},
		{"log/changes_blocks_until_append", testLogBlocks},
		{"log/changes_returns_max_unless_at_the_end", testLogFull},
		{"log/expiry_logged_once", testLogExpiry},
		{"log/entries_carry_time", testLogTime}, // logtime.go
		{"batch/claim_like_single", testClaimBatch},
		{"batch/release_like_single", testReleaseBatch},
		// records.go
		{"records/order_and_fields", testRecords},
		{"records/invalid_rejected", testRecordsInvalid},
		{"records/times", testRecordsTimes},
		// request.go
		{"request/logged_changes_nothing", testRequestLogged},
		{"request/wakes_changes", testRequestWakesChanges},
		{"request/invalid_rejected", testRequestInvalid},
		{"loads/reported_and_in_snapshot", testLoadsReported}, // loads.go
		{"loads/large_report", testLoadsLarge},
		{"loads/wake_changes", testLoadsWakeChanges},
		{"loads/invalid_rejected", testLoadsInvalid},
		// groups.go
		{"groups/listed", testGroups},
		// deletegroup.go
		{"deletegroup/removes_everything", testDeleteGroup}, {"deletegroup/refuses_live_sessions", testDeleteGroupInUse}, {"deletegroup/expired_sessions_do_not_count", testDeleteGroupExpired}, {"deletegroup/invalid_group", testDeleteGroupInvalid},
	}
	t.Run("storetest", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, newStore)
				e.opts = opts
				tc.fn(e)
			})
		}
	})
}

// env is one subtest's store, context and group.
type env struct {
	t     *testing.T
	s     store.Store
	ctx   context.Context
	group string
	opts  Options
}

func newEnv(t *testing.T, newStore func(*testing.T) store.Store) *env {
	t.Helper()
	s := newStore(t)
	if s == nil {
		t.Fatal("newStore returned nil")
	}
	ctx, cancel := context.WithTimeout(t.Context(), subtestTimeout)
	t.Cleanup(cancel)
	return &env{t: t, s: s, ctx: ctx, group: newGroup(t, "")}
}

// newGroup returns a group id that no other subtest or run uses.
func newGroup(t *testing.T, suffix string) string {
	return fmt.Sprintf("herd-storetest/%s/%016x%s", path.Base(t.Name()), rand.Uint64(), suffix)
}

// open opens a session in the env's group and fails the test on error.
func (e *env) open(member string, ttl time.Duration) string {
	e.t.Helper()
	return e.openIn(e.group, member, 1, ttl)
}

func (e *env) openIn(group, member string, weight int, ttl time.Duration) string {
	e.t.Helper()
	id, err := e.s.OpenSession(e.ctx, group, member, weight, ttl)
	if err != nil {
		e.t.Fatalf("OpenSession(group %q, member %q, weight %d, ttl %v): %v; want a new session", group, member, weight, ttl, err)
	}
	if id == "" {
		e.t.Fatalf("OpenSession(group %q, member %q) returned an empty session id and no error", group, member)
	}
	return id
}

func (e *env) close(session string) {
	e.t.Helper()
	if err := e.s.CloseSession(e.ctx, e.group, session); err != nil {
		e.t.Fatalf("CloseSession(%q): %v; want nil", session, err)
	}
}

func (e *env) snap() *store.Snapshot {
	e.t.Helper()
	return e.snapOf(e.group)
}

func (e *env) snapOf(group string) *store.Snapshot {
	e.t.Helper()
	s, err := e.s.Snapshot(e.ctx, group)
	if err != nil {
		e.t.Fatalf("Snapshot(%q): %v; want a snapshot", group, err)
	}
	if s == nil {
		e.t.Fatalf("Snapshot(%q) returned nil and no error", group)
	}
	for _, o := range s.Owners {
		if o.Checkpoint != nil {
			e.t.Fatalf("Snapshot(%q) record %s carries a checkpoint; want none: a snapshot never carries checkpoint values (Claim returns the one it needs)", group, fmtOwner(o))
		}
	}
	return s
}

func (e *env) setPartitions(ids ...string) {
	e.t.Helper()
	ps := make([]store.Partition, len(ids))
	for i, id := range ids {
		ps[i] = store.Partition{ID: id}
	}
	if _, err := e.s.SetPartitions(e.ctx, e.group, store.PartitionSet{Partitions: ps}); err != nil {
		e.t.Fatalf("SetPartitions(%q): %v; want nil", ids, err)
	}
}

// claim claims partition for session and fails the test unless it succeeds
// with a well-formed record.
func (e *env) claim(partition, session string) store.Ownership {
	e.t.Helper()
	return e.claimIn(e.group, partition, session)
}

func (e *env) claimIn(group, partition, session string) store.Ownership {
	e.t.Helper()
	o, err := store.Claim(e.ctx, e.s, group, partition, session)
	if err != nil {
		e.t.Fatalf("Claim(group %q, partition %q, session %q): %v; want success", group, partition, session, err)
	}
	if o.Partition != partition || o.Session != session || o.Epoch == 0 {
		e.t.Fatalf("Claim(%q, %q) returned %s; want Partition %q, Session %q and an epoch > 0", partition, session, fmtOwner(o), partition, session)
	}
	return o
}

func (e *env) checkpoint(partition string, epoch uint64, value string) {
	e.t.Helper()
	if err := e.s.Checkpoint(e.ctx, e.group, partition, epoch, []byte(value)); err != nil {
		e.t.Fatalf("Checkpoint(%q, epoch %d, %q) by the current owner: %v; want nil", partition, epoch, value, err)
	}
}

func (e *env) release(partition, session string, epoch uint64) {
	e.t.Helper()
	if err := store.Release(e.ctx, e.s, e.group, partition, session, epoch); err != nil {
		e.t.Fatalf("Release(%q, session %q, epoch %d) by the current owner: %v; want nil", partition, session, epoch, err)
	}
}

// record returns partition's ownership record from a fresh snapshot.
func (e *env) record(partition string) (store.Ownership, bool) {
	e.t.Helper()
	return findOwner(e.snap(), partition)
}

// mustRecord is record, failing the test if there is none.
func (e *env) mustRecord(partition string) store.Ownership {
	e.t.Helper()
	o, ok := e.record(partition)
	if !ok {
		e.t.Fatalf("Snapshot has no ownership record for partition %q; want one", partition)
	}
	return o
}

// wantCheckpoint checks partition's checkpoint, which only Claim returns:
// session (the owner, or any live session if the record is free) claims the
// partition again and must get want. It returns the new ownership: its epoch
// replaces the previous one.
func (e *env) wantCheckpoint(partition, session, want, why string) store.Ownership {
	e.t.Helper()
	o := e.claim(partition, session)
	if !bytes.Equal(o.Checkpoint, []byte(want)) {
		e.t.Fatalf("%s: checkpoint of %q is %q; want %q", why, partition, o.Checkpoint, want)
	}
	return o
}

// waitGone polls the snapshot until session is no longer alive, failing the
// test if it still is after the deadline.
func (e *env) waitGone(session string, within time.Duration) time.Time {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if !e.snap().Alive(session) {
			return time.Now()
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("session %q is still alive in the snapshot %v after its TTL should have expired; want it gone", session, within)
		}
		select {
		case <-time.After(pollEvery):
		case <-e.ctx.Done():
			e.t.Fatalf("waiting for session %q to expire: %v", session, e.ctx.Err())
		}
	}
}
