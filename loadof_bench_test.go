package herd

import (
	"fmt"
	"testing"

	"github.com/herdhq/herd/store"
)

// BenchmarkLoadOfPending is the lookup of a partition's published load
// that each handler's start makes (loadOf), while the feed has a
// placement's claims queued: 99,000 entries, none publishing loads. A
// member of 16 on 100,000 partitions starts 6,250 handlers while such a
// queue is being applied.
//
//	go test -run '^$' -bench LoadOfPending .
func BenchmarkLoadOfPending(b *testing.B) {
	const parts = 100_000
	snap := &store.Snapshot{}
	for i := range parts {
		snap.Owners = append(snap.Owners, store.Ownership{Partition: fmt.Sprintf("p-%06d", i)})
	}
	r := &replica{work: snap, inPlan: true} // plan holds the copy: the feed only queues
	f := &feed{r: r}
	for seq := 1; seq < parts-store.MaxBatch; seq += store.MaxBatch {
		cs := make([]store.Change, store.MaxBatch)
		for j := range cs {
			v := seq + j
			cs[j] = store.Change{Version: store.Version{Seq: uint64(v), Tag: 1}, Kind: store.Claimed,
				Partition: snap.Owners[v].Partition, Session: "s2", Member: "m2", Epoch: 1}
		}
		f.queue(cs, kindsOf(cs))
	}
	if r.npending < parts/2 {
		b.Fatalf("%d entries queued; want most of %d", r.npending, parts)
	}
	b.ResetTimer()
	for range b.N {
		if _, ok := r.loadOf("p-050000"); ok {
			b.Fatal("a load found where none was published")
		}
	}
}
