package store

import (
	"fmt"
	"testing"

	"github.com/herdhq/herd/internal/idindex"
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
	if index.Len() < 2*len(owners) || index.Len()&(index.Len()-1) != 0 {
		t.Fatalf("table of %d slots for %d records: want a power of two, at least twice as many", index.Len(), len(owners))
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
	if _, ok := lookupIndex(idindex.Index{}, owners, owners[0].Partition); ok {
		t.Fatal("found a record without an index")
	}
}

// prelocate finds, for each leading entry about a record, the position
// locate finds, or leaves it to locate (-1); it stops at the first entry
// of another kind and after lookAhead entries; an index built on another
// list (records inserted since) never misleads it.
func TestPrelocateFindsWhatLocateFinds(t *testing.T) {
	owners := make([]Ownership, 5000)
	for i := range owners {
		owners[i].Partition = fmt.Sprintf("p%05d", i*2)
	}
	s := &Snapshot{Owners: owners, index: buildIndex(owners)}
	var cs []Change
	for i := range 100 {
		kind := []ChangeKind{Claimed, Released, Restored}[i%3]
		cs = append(cs, Change{Kind: kind, Partition: fmt.Sprintf("p%05d", (i*7919)%10000)}) // half have no record
	}
	// check returns how many entries prelocate found.
	check := func(s *Snapshot, cs []Change, wantN int) (hits int) {
		t.Helper()
		out := make([]int32, lookAhead)
		n := s.prelocate(cs, out)
		if n != wantN {
			t.Fatalf("prelocate looked at %d entries; want %d", n, wantN)
		}
		for j := range n {
			if out[j] < 0 {
				continue
			}
			hits++
			if i, found := s.locate(cs[j].Partition); !found || int(out[j]) != i {
				t.Errorf("%s: prelocate says %d, locate %d (found %v)", cs[j].Partition, out[j], i, found)
			}
		}
		return hits
	}
	if hits := check(s, cs, lookAhead); hits < lookAhead/4 {
		t.Errorf("prelocate found %d of %d entries, about half of which have records", hits, lookAhead)
	}
	check(s, cs[:5], 5)
	mixed := append(append([]Change{}, cs[:3]...), Change{Kind: SessionOpened, Session: "S"})
	mixed = append(mixed, cs[3:10]...)
	check(s, mixed, 3)
	// Records inserted in front: the index names old positions.
	moved := append([]Ownership{{Partition: "a"}, {Partition: "b"}}, owners...)
	check(&Snapshot{Owners: moved, index: s.index}, cs, lookAhead)
	if hits := check(&Snapshot{Owners: owners}, cs, lookAhead); hits != 0 {
		t.Errorf("prelocate found %d entries without an index", hits)
	}
}

// BenchmarkPrelocate locates the records of 100,000 claims, in a scattered
// order (as a placement's entries come: each member's batch of partitions
// spread over the set), in a copy of 100,000 records: the lookups of
// ApplyAllFunc alone.
//
//	go test -run '^$' -bench Prelocate -benchtime 20x ./store/
func BenchmarkPrelocate(b *testing.B) {
	const n = 100_000
	s := &Snapshot{Owners: make([]Ownership, n)}
	for i := range s.Owners {
		s.Owners[i].Partition = fmt.Sprintf("partition-%06d", i)
	}
	s.index = buildIndex(s.Owners)
	cs := make([]Change, n)
	for i := range cs {
		// Strings of their own, as decoded from the log.
		cs[i] = Change{Kind: Claimed, Partition: fmt.Sprintf("partition-%06d", (i*7919)%n)}
	}
	var out [lookAhead]int32
	for b.Loop() {
		for k := 0; k < n; {
			m := s.prelocate(cs[k:], out[:])
			for j := range m {
				if out[j] < 0 {
					b.Fatalf("%s not found", cs[k+j].Partition)
				}
			}
			k += m
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/claim")
}
