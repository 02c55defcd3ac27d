package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/pgtest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

// The server ends the tied connection of one of 4 sessions, 20 times over
// (the session of the last victim's partitions each time): no other
// session claims the victim's partition within the grace, and one does
// just after it.
func TestTieTerminateRepeatedly(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const group = "tie-stress"
	ids := make([]string, 4)
	for i := range ids {
		ids[i], _ = tied(ctx, t, s, group, fmt.Sprint("m", i))
		if _, err := store.Claim(ctx, s, group, fmt.Sprint("p", i), ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	owner := map[int]string{0: ids[0], 1: ids[1], 2: ids[2], 3: ids[3]}
	for round := 0; round < 20; round++ {
		i := round % 4
		v := storetest.Version(ctx, t, s, group)
		at := time.Now()
		victim := owner[i]
		pgtest.Exec(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", tieAppPrefix+victim)
		other := ids[(i+1)%4]
		if other == victim {
			other = ids[(i+2)%4]
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the victim's partition could not be claimed within 5s", round)
			}
			_, err := store.Claim(ctx, s, group, fmt.Sprint("p", i), other)
			if err == nil {
				d := time.Since(at)
				cs, _, _ := s.Changes(ctx, group, v, 100)
				t.Logf("round %d: claimed %v after pg_terminate_backend", round, d.Round(time.Millisecond))
				if d < tieGrace {
					for _, c := range cs {
						t.Logf("  %v %s at %v", c.Kind, c.Session, c.At.Sub(at))
					}
					t.Errorf("claimed within the grace")
				}
				break
			}
			time.Sleep(2 * time.Millisecond) // polling the claim
		}
		for j, o := range owner {
			if o == victim {
				if _, err := store.Claim(ctx, s, group, fmt.Sprint("p", j), other); err != nil {
					t.Fatal(err)
				}
				owner[j] = other
			}
		}
		for j := range ids {
			if ids[j] == victim {
				ids[j], _ = tied(ctx, t, s, group, fmt.Sprint("m", j))
			}
		}
	}
}
