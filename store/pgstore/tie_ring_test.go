package pgstore

import (
	"context"
	"testing"
	"time"
)

// The ring's waits form a cycle (each tie holds its lock and waits for
// the next one's): watch keeps each wait below deadlock_timeout, so the
// server never breaks the cycle with a deadlock error, which left the
// tie it hit unwatched while the watch paused.
func TestTieRingNoDeadlock(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "tie-ring"
	var ties []*tie
	for _, m := range []string{"a", "b", "c"} {
		_, tt := tied(ctx, t, s, group, m)
		ties = append(ties, tt.(*tie))
	}
	n0 := make([]int64, len(ties))
	for i, tt := range ties {
		n0[i] = tt.watches.Load()
	}
	// Three waits each after the joins' nudges: each outlasts
	// deadlock_timeout (1 s by default) unless watch bounds it.
	for i, tt := range ties {
		for tt.watches.Load() < n0[i]+3 {
			if ctx.Err() != nil {
				t.Fatalf("tie %d: %d watches returned; want 3 more", i, tt.watches.Load()-n0[i])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i, tt := range ties {
		if f := tt.failed.Load(); f > 0 {
			t.Errorf("tie %d: %d watch statements failed (a deadlock of the ring); want none", i, f)
		}
	}
}

// Deleting a group deletes its ties' rows.
func TestTieRowsGoWithGroup(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, tieA := tied(ctx, t, s, "tie-delete", "a")
	if err := s.DeleteGroup(ctx, "tie-delete", true); err != nil {
		t.Fatal(err)
	}
	_ = tieA.Close()
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+s.qschema+".ties").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d ties rows left after their group was deleted; want none", n)
	}
}
