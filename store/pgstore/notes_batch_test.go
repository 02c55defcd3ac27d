package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// A batch of 625 claims (a member's share of 10,000 partitions among 16)
// reaches a waiting reader in its notifications, without a read of the
// log table: in a fleet's first placement every member's reader would
// otherwise read every claim's 625 rows (16 readers x 16 claims). The
// entries are those the table holds.
func TestNotificationsCarryABatch(t *testing.T) {
	s := openTest(t, WithPollInterval(time.Hour), withBackstop(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "batch"
	sess, v := claimWithListenUp(ctx, t, s, group)
	ids := make([]string, 625)
	for i := range ids {
		ids[i] = fmt.Sprintf("partition-%06d", i)
	}
	ch := changesAsync(ctx, s, group, v)
	res, err := s.ClaimBatch(ctx, group, sess, ids)
	if err != nil {
		t.Fatal(err)
	}
	before := s.logReads.Load()
	var got []store.Change
	for len(got) < len(ids) {
		r := <-ch
		if r.err != nil || len(r.cs) == 0 {
			t.Fatalf("after %d entries of the batch: Changes returned %+v, %v", len(got), r.cs, r.err)
		}
		got = append(got, r.cs...)
		if len(got) < len(ids) {
			ch = changesAsync(ctx, s, group, r.next)
		}
	}
	if reads := s.logReads.Load() - before; reads != 0 {
		t.Fatalf("the reader read the log table %d times for a batch of %d claims; want its entries from the notifications", reads, len(ids))
	}
	if len(got) != len(ids) {
		t.Fatalf("the reader got %d entries; want the batch's %d", len(got), len(ids))
	}
	table, _, err := s.readChanges(ctx, group, v, len(ids))
	if err != nil || len(table) != len(got) {
		t.Fatalf("the table has %d entries after %v (%v); the notifications brought %d", len(table), v, err, len(got))
	}
	for i, c := range got {
		if !sameChange(c, table[i]) || !c.At.Equal(table[i].At) || c.Kind != store.Claimed || c.Epoch != res[i].Ownership.Epoch {
			t.Fatalf("entry %d from a notification %+v; the table has %+v (claim %+v)", i, c, table[i], res[i])
		}
	}
}
