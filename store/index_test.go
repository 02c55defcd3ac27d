package store

import (
	"fmt"
	"testing"
)

// buildIndex's table finds every record of the list it was built on, finds
// nothing for an id without a record, and, once the list changed under it
// (records moved, the list shortened), answers only where the record at the
// position it names is still the partition's: it may miss, never mislead.
func TestIndexFindsOnlyWhatIsThere(t *testing.T) {
	owners := make([]Ownership, 5000)
	for i := range owners {
		owners[i].Partition = fmt.Sprintf("p%05d", i*2)
	}
	index := buildIndex(owners)
	if len(index) < 2*len(owners) || len(index)&(len(index)-1) != 0 {
		t.Fatalf("table of %d slots for %d records: want a power of two, at least twice as many", len(index), len(owners))
	}
	for i, o := range owners {
		if got, ok := lookupIndex(index, owners, o.Partition); !ok || got != i {
			t.Fatalf("%s: got %d, %v; want %d", o.Partition, got, ok, i)
		}
		if _, ok := lookupIndex(index, owners, fmt.Sprintf("p%05d", i*2+1)); ok {
			t.Fatalf("p%05d has no record, but was found", i*2+1)
		}
	}
	moved := append([]Ownership{{Partition: "a"}}, owners[:len(owners)/2]...)
	for i, o := range owners {
		got, ok := lookupIndex(index, moved, o.Partition)
		if ok && (got >= len(moved) || moved[got].Partition != o.Partition) {
			t.Fatalf("%s (record %d): found at %d in a list where it is not", o.Partition, i, got)
		}
	}
	if _, ok := lookupIndex(nil, owners, owners[0].Partition); ok {
		t.Fatal("found a record without an index")
	}
}
