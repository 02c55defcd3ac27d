package herd

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/herdhq/herd/store"
)

// TestWithPlaceholders: every record kept whole, in order, a record of a
// partition of the set with the set's own string, and a placeholder (epoch
// 0, nothing else) for each partition of the set without a record, with
// records outside the set before, among and after them; the records of a
// live session with its strings; and records not in strict order refused.
func TestWithPlaceholders(t *testing.T) {
	ps := []store.Partition{{ID: "b"}, {ID: "d"}, {ID: "f"}, {ID: "g"}}
	ss := []store.SessionInfo{{ID: "S", Member: "m"}}
	live := liveSessions(ss)
	rec := func(p string, e uint64) store.Ownership {
		return store.Ownership{Partition: strings.Clone(p), Session: strings.Clone("S"), Member: strings.Clone("m"), Epoch: e, GivenBack: "G", Checkpoint: []byte("c")}
	}
	for _, tc := range []struct {
		rs   []store.Ownership
		want []string // partition:epoch; nil: refused (not sorted)
	}{
		{nil, []string{"b:0", "d:0", "f:0", "g:0"}},
		{[]store.Ownership{rec("d", 3)}, []string{"b:0", "d:3", "f:0", "g:0"}},
		{[]store.Ownership{rec("a", 1), rec("b", 2), rec("c", 3), rec("c2", 4), rec("e", 5), rec("h", 6), rec("i", 7)},
			[]string{"a:1", "b:2", "c:3", "c2:4", "d:0", "e:5", "f:0", "g:0", "h:6", "i:7"}},
		{[]store.Ownership{rec("b", 1), rec("d", 2), rec("f", 3), rec("g", 4)}, []string{"b:1", "d:2", "f:3", "g:4"}},
		{[]store.Ownership{rec("d", 1), rec("b", 2)}, nil},
		{[]store.Ownership{rec("c", 1), rec("a", 2)}, nil},
		{[]store.Ownership{rec("b", 1), rec("b", 2)}, nil},
		{[]store.Ownership{rec("c", 1), rec("c", 2)}, nil},
		{[]store.Ownership{rec("h", 1), rec("h", 2)}, nil},
		{[]store.Ownership{rec("i", 1), rec("h", 2)}, nil},
		{[]store.Ownership{rec("g", 1), rec("a", 2)}, nil},
	} {
		out, sorted := withPlaceholders(ps, tc.rs, live)
		if sorted != (tc.want != nil) {
			t.Errorf("withPlaceholders(%v) sorted = %v; want %v", tc.rs, sorted, tc.want != nil)
			continue
		}
		var got []string
		for _, o := range out {
			got = append(got, fmt.Sprintf("%s:%d", o.Partition, o.Epoch))
			i, in := slices.BinarySearchFunc(ps, o.Partition, func(p store.Partition, id string) int { return strings.Compare(p.ID, id) })
			switch {
			case o.Epoch == 0 && (o.Session != "" || o.Member != "" || o.GivenBack != "" || o.Checkpoint != nil || !in):
				t.Errorf("placeholder %+v: want a partition of the set and nothing else", o)
			case o.Epoch > 0 && (o.Session != "S" || o.Member != "m" || o.GivenBack != "G" || string(o.Checkpoint) != "c"):
				t.Errorf("record %+v: fields lost", o)
			case o.Epoch > 0 && (unsafe.StringData(o.Session) != unsafe.StringData(ss[0].ID) || unsafe.StringData(o.Member) != unsafe.StringData(ss[0].Member)):
				t.Errorf("record %+v: not the live session's strings", o)
			case in && unsafe.StringData(o.Partition) != unsafe.StringData(ps[i].ID):
				t.Errorf("record of %q: not the set's string", o.Partition)
			}
		}
		if tc.want != nil && !slices.Equal(got, tc.want) {
			t.Errorf("withPlaceholders(%v) = %v; want %v", tc.rs, got, tc.want)
		}
	}
}

// TestWithPlaceholdersKeepsEveryField: a record is copied field by field
// (withPlaceholders' add), so each field of store.Ownership, set to a value
// that is not zero, must come through: a field added to the type and not to
// add fails here.
func TestWithPlaceholdersKeepsEveryField(t *testing.T) {
	var r store.Ownership
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x" + v.Type().Field(i).Name)
		case reflect.Uint64, reflect.Uint, reflect.Uint32:
			f.SetUint(uint64(i + 1))
		case reflect.Int, reflect.Int64, reflect.Int32:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		default:
			t.Fatalf("field %s of kind %v: teach this test (and withPlaceholders) about it", v.Type().Field(i).Name, f.Kind())
		}
	}
	ps := []store.Partition{{ID: r.Partition}}
	out, sorted := withPlaceholders(ps, []store.Ownership{r}, nil)
	if !sorted || len(out) != 1 || !reflect.DeepEqual(out[0], r) {
		t.Errorf("withPlaceholders kept %+v (sorted %v); want %+v", out, sorted, r)
	}
}

// TestSortedCopyUnsorted: records out of order or duplicated (a backend
// breaking its promise) are sorted, the last of duplicates kept.
func TestSortedCopyUnsorted(t *testing.T) {
	snap := &store.Snapshot{
		Partitions: []store.Partition{{ID: "a"}, {ID: "b"}, {ID: "c"}},
		Owners:     []store.Ownership{{Partition: "c", Epoch: 1}, {Partition: "a", Epoch: 2}, {Partition: "c", Epoch: 3}, {Partition: "z", Epoch: 4}},
	}
	var got []string
	for _, o := range sortedCopy(snap).Owners {
		got = append(got, fmt.Sprintf("%s:%d", o.Partition, o.Epoch))
	}
	if want := []string{"a:2", "b:0", "c:3", "z:4"}; !slices.Equal(got, want) {
		t.Errorf("sortedCopy's records %v; want %v", got, want)
	}
}

// BenchmarkSortedCopy makes the replica's copy of a read of a group of
// 100,000 partitions and 16 sessions, without records (a fleet's first
// placement) and with a record for each partition.
//
//	go test -run '^$' -bench SortedCopy -benchtime 20x .
func BenchmarkSortedCopy(b *testing.B) {
	const n = 100_000
	snap := &store.Snapshot{}
	for i := range 16 {
		snap.Sessions = append(snap.Sessions, store.SessionInfo{ID: fmt.Sprintf("S%025d", i), Member: fmt.Sprintf("host-%03d", i)})
	}
	for i := range n {
		snap.Partitions = append(snap.Partitions, store.Partition{ID: fmt.Sprintf("partition-%06d", i)})
	}
	for _, records := range []bool{false, true} {
		s := *snap
		if records {
			for i, p := range s.Partitions {
				ss := s.Sessions[i%len(s.Sessions)]
				s.Owners = append(s.Owners, store.Ownership{Partition: strings.Clone(p.ID), Session: strings.Clone(ss.ID), Member: ss.Member, Epoch: 1})
			}
		}
		b.Run(fmt.Sprintf("records=%v", records), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c := sortedCopy(&s); len(c.Owners) != n {
					b.Fatalf("%d records; want %d", len(c.Owners), n)
				}
			}
		})
	}
}
