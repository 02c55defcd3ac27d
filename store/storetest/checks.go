package storetest

// Checks and small helpers the conformance tests share.

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// wantErr fails the test unless errors.Is(err, target).
func wantErr(t *testing.T, err, target error, call, why string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v; want %v (%s)", call, err, target, why)
	}
}

func findOwner(s *store.Snapshot, partition string) (store.Ownership, bool) {
	for _, o := range s.Owners {
		if o.Partition == partition {
			return o, true
		}
	}
	return store.Ownership{}, false
}

func findSession(s *store.Snapshot, id string) (store.SessionInfo, bool) {
	for _, si := range s.Sessions {
		if si.ID == id {
			return si, true
		}
	}
	return store.SessionInfo{}, false
}

func fmtOwner(o store.Ownership) string {
	return fmt.Sprintf("{Partition %q, Session %q, Member %q, Epoch %d, Checkpoint %q, GivenBack %q}", o.Partition, o.Session, o.Member, o.Epoch, o.Checkpoint, o.GivenBack)
}

// sameOwner compares two records as a snapshot shows them: the checkpoint,
// which only Claim returns, is not compared.
func sameOwner(a, b store.Ownership) bool {
	return a.Partition == b.Partition && a.Session == b.Session && a.Member == b.Member &&
		a.Epoch == b.Epoch && a.GivenBack == b.GivenBack
}

// checkSorted fails the test unless the snapshot's three lists are sorted
// by id in byte order (Go string order, not a database collation) and hold
// no duplicates.
func checkSorted(t *testing.T, s *store.Snapshot) {
	t.Helper()
	check := func(what string, ids []string) {
		t.Helper()
		for i := 1; i < len(ids); i++ {
			if ids[i-1] >= ids[i] {
				t.Fatalf("Snapshot.%s is not strictly sorted by id in byte order: %q comes before %q (full order %q)", what, ids[i-1], ids[i], ids)
			}
		}
	}
	ids := make([]string, 0, len(s.Sessions))
	for _, si := range s.Sessions {
		ids = append(ids, si.ID)
	}
	check("Sessions", ids)
	ids = ids[:0]
	for _, p := range s.Partitions {
		ids = append(ids, p.ID)
	}
	check("Partitions", ids)
	ids = ids[:0]
	for _, o := range s.Owners {
		ids = append(ids, o.Partition)
	}
	check("Owners", ids)
}

func partitionIDs(ps []store.Partition) []string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids
}

func sortedCopy(ids []string) []string {
	c := slices.Clone(ids)
	slices.Sort(c)
	return c
}

// quote formats an id for a message, abbreviating long ones.
func quote(id string) string {
	if len(id) > 40 {
		return fmt.Sprintf("%q...(%d bytes)", id[:20], len(id))
	}
	return fmt.Sprintf("%q", id)
}

// keepErr is KeepAlive's error, for tests that check only that.
func keepErr(_ time.Duration, err error) error { return err }
