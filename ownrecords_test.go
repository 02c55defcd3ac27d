package herd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// A member at rest checks one batch of its own records per PollInterval,
// the next batch each time, around its share and back to the start; a
// record edited by hand is found when its batch comes.
func TestOwnRecordsOneBatchPerCheck(t *testing.T) {
	ctx := t.Context()
	mem := memstore.New()
	st := faultstore.Wrap(mem)
	const n = 2*store.MaxBatch + 500
	ps := make([]store.Partition, n)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprintf("p%05d", i)}
	}
	if _, err := st.SetPartitions(ctx, "g", store.PartitionSet{Partitions: ps}); err != nil {
		t.Fatal(err)
	}
	id, err := st.OpenSession(ctx, "g", "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m := &Member{st: st, cfg: Config{Group: "g", RenewTimeout: time.Second}}
	m.running.owned = map[string]uint64{}
	for i := 0; i < n; i += store.MaxBatch {
		batch := make([]string, 0, store.MaxBatch)
		for j := i; j < min(n, i+store.MaxBatch); j++ {
			batch = append(batch, ps[j].ID)
		}
		res, err := st.ClaimBatch(ctx, "g", id, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			m.running.owned[r.Ownership.Partition] = r.Ownership.Epoch
		}
	}
	sess := &session{id: id, ctx: context.Background()}

	check := func(from string) (bool, string, int64) {
		before := st.Ops().Reads
		ok, next := m.ownRecordsIntact(sess, from)
		return ok, next, st.Ops().Reads - before
	}
	from := ""
	for i, want := range []string{ps[store.MaxBatch-1].ID, ps[2*store.MaxBatch-1].ID, "", ps[store.MaxBatch-1].ID} {
		ok, next, reads := check(from)
		if !ok || next != want || reads != 1 {
			t.Fatalf("check %d from %q: intact %v, next %q, %d reads; want true, %q, 1", i, from, ok, next, reads, want)
		}
		from = next
	}

	// The member's epoch of a partition in the last batch no longer
	// matches its record (as after a record rewritten by hand): the two
	// first batches are intact, the third is not.
	m.running.owned[ps[n-1].ID]++
	for i, want := range []bool{true, false, true} {
		ok, next, _ := check(from)
		if ok != want {
			t.Fatalf("after the edit, check %d from %q: intact %v; want %v", i, from, ok, want)
		}
		from = next
	}
}
