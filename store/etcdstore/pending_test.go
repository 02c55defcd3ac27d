package etcdstore

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// assertNoPending fails t if group has pending log entries once the
// store's background sequencing has ended (every writer's store sequences
// its own).
func assertNoPending(t *testing.T, s *Store, group string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.sequenced(ctx); err != nil {
		t.Fatalf("waiting for the store's sequencing: %v", err)
	}
	resp, err := s.c.Get(ctx, s.groupKey(group)+"u/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Errorf("%d pending log keys left in group %q; want none", resp.Count, group)
	}
}

// TestPendingEntries: entries left pending (their writer stopped before
// sequencing them) are the log's last entries for every reader: Changes
// returns them, numbered after the sequenced ones, and a snapshot's
// version is after them; the next write sequences them, and their seqs
// and tags stay what readers were given.
func TestPendingEntries(t *testing.T) {
	s, _ := openTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const group = "pending"
	sess, start := leavePendingEntry(ctx, t, s, group)
	snap, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version.Seq != start.Version.Seq+1 || len(snap.Owners) != 1 || snap.Owners[0].Epoch != 5 {
		t.Fatalf("snapshot with an entry pending: version %v, owners %+v; want seq %d and p at epoch 5", snap.Version, snap.Owners, start.Version.Seq+1)
	}
	cs, v, err := s.Changes(ctx, group, start.Version, 10)
	if err != nil || len(cs) != 1 || cs[0].Kind != store.Restored || v != snap.Version {
		t.Fatalf("Changes after %v with an entry pending: %+v, %v, %v; want the Restored entry at %v", start.Version, cs, v, err, snap.Version)
	}
	// The next write (a claim) sequences the pending entry before its own.
	if _, err := store.Claim(ctx, s, group, "q", sess); err != nil {
		t.Fatal(err)
	}
	assertNoPending(t, s, group)
	cs, _, err = s.Changes(ctx, group, start.Version, 10)
	if err != nil || len(cs) != 2 || cs[0].Version != snap.Version || cs[1].Kind != store.Claimed || cs[1].Version.Seq != snap.Version.Seq+1 {
		t.Fatalf("Changes after %v once sequenced: %+v, %v; want the Restored entry at %v, then the claim", start.Version, cs, err, snap.Version)
	}
	// A reader at the pending entry's version goes on from it.
	cs, _, err = s.Changes(ctx, group, snap.Version, 10)
	if err != nil || len(cs) != 1 || cs[0].Kind != store.Claimed {
		t.Fatalf("Changes after %v: %+v, %v; want the claim", snap.Version, cs, err)
	}
	last, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if err := start.ApplyAll(append([]store.Change{}, mustChanges(t, s, group, start.Version)...)); err != nil {
		t.Fatal(err)
	}
	if start.Version != last.Version {
		t.Fatalf("the first snapshot with the log applied is at %v; the last snapshot at %v", start.Version, last.Version)
	}
}

func mustChanges(t *testing.T, s *Store, group string, after store.Version) []store.Change {
	t.Helper()
	cs, _, err := s.Changes(t.Context(), group, after, 100)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// sequenced waits until the store's background sequencing has ended
// (sequenceLater), or ctx ends.
func (s *Store) sequenced(ctx context.Context) error {
	for {
		var done chan struct{}
		s.seqs.mu.Lock()
		for _, q := range s.seqs.due {
			done = q.done
			break
		}
		s.seqs.mu.Unlock()
		if done == nil {
			return nil
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// leavePendingEntry opens a session in group and leaves a pending entry
// there, a restore of partition p at epoch 5 written as a writer that stops
// before sequencing leaves it. It returns the session and the snapshot from
// before the entry.
func leavePendingEntry(ctx context.Context, t *testing.T, s *Store, group string) (string, *store.Snapshot) {
	t.Helper()
	sess, err := s.OpenSession(ctx, group, "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	start, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	g := s.groupKey(group)
	w := &write{g: g, group: group, later: &pendingKeys{}}
	w.put(g+"r/p", mustJSON(record{Epoch: 5, Since: now().UnixMicro()}))
	w.append(store.Change{Kind: store.Restored, Partition: "p", Epoch: 5})
	if ok, err := s.commit(ctx, w); !ok || err != nil {
		t.Fatalf("commit: %v, %v", ok, err)
	}
	return sess, start
}
