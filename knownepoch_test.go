package herd

import (
	"testing"

	"github.com/herdhq/herd/store"
)

// epochOf answers from the copy: the latest claim or restore queued for the
// partition, else its record, else 0.
func TestReplicaEpochOf(t *testing.T) {
	r := &replica{work: &store.Snapshot{Owners: []store.Ownership{
		{Partition: "a", Epoch: 5}, {Partition: "b", Epoch: 7, Session: "s"}, {Partition: "c", Epoch: 9},
	}}}
	r.pending = [][]store.Change{
		{{Kind: store.Claimed, Partition: "b", Epoch: 8}, {Kind: store.Released, Partition: "b", Epoch: 8}},
		{{Kind: store.Restored, Partition: "d", Epoch: 3}, {Kind: store.Claimed, Partition: "b", Epoch: 10}},
	}
	for p, want := range map[string]uint64{"a": 5, "b": 10, "c": 9, "d": 3, "e": 0} {
		if got := r.epochOf(p); got != want {
			t.Errorf("epochOf(%q) = %d; want %d", p, got, want)
		}
	}
	if got := (&replica{}).epochOf("a"); got != 0 {
		t.Errorf("epochOf without a copy = %d; want 0", got)
	}
}
