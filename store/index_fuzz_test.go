package store

import (
	"slices"
	"strings"
	"testing"
)

// FuzzIndex builds the index of a list of records (ids read from the
// store: any bytes), and checks that lookupIndex and prelocate find each
// record where it is and nothing else, on the list the index was built on
// and, after the list lost a record, never a wrong position
// (docs/fuzzing.md).
func FuzzIndex(f *testing.F) {
	f.Add("a\x00b\x00c\x00p00001", "b\x00zz\x00", uint8(1))
	f.Add("", "x", uint8(0))
	f.Add("0\x001\x002\x003\x004\x005\x006\x007\x008\x009", "9\x000\x0010", uint8(9))
	f.Fuzz(func(t *testing.T, list, queries string, drop uint8) {
		ids := strings.Split(list, "\x00")
		slices.Sort(ids)
		ids = slices.Compact(ids)
		owners := make([]Ownership, len(ids))
		for i, id := range ids {
			owners[i].Partition = id
		}
		qs := append(slices.Clone(ids), strings.Split(queries, "\x00")...)
		s := &Snapshot{Owners: owners, index: buildIndex(owners)}
		check := func(what string, exact bool) {
			for _, q := range qs {
				want, found := slices.BinarySearchFunc(s.Owners, q, func(o Ownership, id string) int { return strings.Compare(o.Partition, id) })
				i, ok := lookupIndex(s.index, s.Owners, q)
				if ok && (!found || i != want) {
					t.Fatalf("%s: lookupIndex(%q) = %d; the record is at %d (%v)", what, q, i, want, found)
				}
				if exact && ok != found {
					t.Fatalf("%s: lookupIndex(%q) missed the record at %d", what, q, want)
				}
				if li, lok := s.locate(q); lok != found || found && li != want {
					t.Fatalf("%s: locate(%q) = %d, %v; want %d, %v", what, q, li, lok, want, found)
				}
			}
			for len(qs) > 0 {
				cs := make([]Change, min(len(qs), lookAhead))
				for j := range cs {
					cs[j] = Change{Kind: Claimed, Partition: qs[j]}
				}
				out := make([]int32, len(cs))
				n := s.prelocate(cs, out)
				if n != len(cs) {
					t.Fatalf("%s: prelocate looked at %d of %d", what, n, len(cs))
				}
				for j := range n {
					if out[j] >= 0 && s.Owners[out[j]].Partition != qs[j] {
						t.Fatalf("%s: prelocate(%q) = %d, the record of %q", what, qs[j], out[j], s.Owners[out[j]].Partition)
					}
				}
				qs = qs[n:]
			}
			qs = append(slices.Clone(ids), strings.Split(queries, "\x00")...)
		}
		check("index of the list", true)
		if len(owners) > 0 {
			s.Owners = slices.Delete(slices.Clone(owners), int(drop)%len(owners), int(drop)%len(owners)+1)
			check("index of a longer list", false)
		}
	})
}
