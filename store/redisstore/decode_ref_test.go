package redisstore

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/herdhq/herd/store"
)

// refDecodeChange is the decoder of a log entry's value that decodeChange
// replaced (fields split into a list, then matched by kind): the reference
// FuzzDecodeChangeSame holds decodeChange to.
func refDecodeChange(version store.Version, v string) (store.Change, error) {
	var f []string
	if strings.HasPrefix(v, "P\n") {
		f = strings.Split(v, "\n")
	} else {
		rest := v
		for len(f) < 6 {
			i := strings.IndexByte(rest, '\n')
			if i < 0 {
				f = append(f, rest)
				break
			}
			f, rest = append(f, rest[:i]), rest[i+1:]
		}
	}
	c := store.Change{Version: version}
	bad := func() (store.Change, error) {
		return store.Change{}, fmt.Errorf("entry %v %q cannot be decoded", version, abbrev(v))
	}
	epoch := func(s string) (uint64, bool) {
		e, err := strconv.ParseUint(s, 10, 64)
		return e, err == nil && e > 0
	}
	var ok bool
	switch {
	case f[0] == "O" && len(f) == 3:
		c.Kind, c.Session = store.SessionOpened, f[1]
		if c.Weight, c.Member, ok = parseMeta(f[2]); !ok {
			return bad()
		}
	case f[0] == "X" && len(f) == 2:
		c.Kind, c.Session = store.SessionClosed, f[1]
	case f[0] == "E" && len(f) == 2:
		c.Kind, c.Session = store.SessionExpired, f[1]
	case f[0] == "C" && len(f) == 5:
		c.Kind, c.Partition, c.Session, c.Member = store.Claimed, f[1], f[2], f[4]
		if c.Epoch, ok = epoch(f[3]); !ok {
			return bad()
		}
	case f[0] == "R" && (len(f) == 4 || len(f) == 5):
		c.Kind, c.Partition, c.Session = store.Released, f[1], f[2]
		if len(f) == 5 {
			if c.GivenBack = f[4]; c.GivenBack == "" {
				return bad()
			}
		}
		if c.Epoch, ok = epoch(f[3]); !ok {
			return bad()
		}
	case f[0] == "T" && len(f) == 3:
		c.Kind, c.Partition = store.Restored, f[1]
		if c.Epoch, ok = epoch(f[2]); !ok {
			return bad()
		}
	case f[0] == "P" && len(f)%2 == 1:
		c.Kind = store.PartitionsSet
		c.Partitions = make([]store.Partition, 0, len(f)/2)
		for i := 1; i+1 < len(f); i += 2 {
			w, err := strconv.Atoi(f[i+1])
			if err != nil || w < 0 {
				return bad()
			}
			c.Partitions = append(c.Partitions, store.Partition{ID: f[i], Weight: w})
		}
		slices.SortFunc(c.Partitions, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
	default:
		return bad()
	}
	return c, nil
}

// FuzzDecodeChangeSame: decodeChange decodes every value as the reference
// does, and fails where it fails.
func FuzzDecodeChangeSame(f *testing.F) {
	for _, s := range []string{"O\nS\n1:m", "O\nS\n1:m\nx", "O\nS", "X\nS", "X\nS\nT", "X", "X\n", "E\nS", "E",
		"C\np\nS\n5\nm", "C\np\nS\n5\nm\n", "C\np\nS\n5", "C\np\nS\n05\nm", "C\np\nS\n18446744073709551615\nm",
		"C\np\nS\n18446744073709551616\nm", "C\np\nS\n+5\nm", "C\np\nS\n\nm", "C\n\n\n1\n",
		"R\np\nS\n5", "R\np\nS\n5\nS", "R\np\nS\n5\n", "R\np\nS\n5\nS\nx", "R\np\nS",
		"T\np\n5", "T\np\n5\n", "T\np", "P\na\n1\nb\n2", "P\nb\n1\na\n2", "P", "P\n", "P\na\n-1", "P\na", "Px", "",
		"\n", "C", "Z\nx", "O\nS\nx:m", "O\nS\n:m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		ver := store.Version{Seq: 3, Tag: 9}
		got, gerr := decodeChange(ver, v)
		want, werr := refDecodeChange(ver, v)
		if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeChange(%q) = %+v, %v; want %+v, %v", v, got, gerr, want, werr)
		}
		if gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("decodeChange(%q): error %q; want %q", v, gerr, werr)
		}
	})
}

// TestDecodeChangeToOverwrites: decoding into a used Change leaves nothing
// of what it held.
func TestDecodeChangeToOverwrites(t *testing.T) {
	c := store.Change{Kind: store.Released, Partition: "old", Session: "S", Member: "m", Weight: 3, GivenBack: "G",
		Partitions: []store.Partition{{ID: "x"}}}
	if err := decodeChangeTo(&c, store.Version{Seq: 1, Tag: 2}, "T\np\n5"); err != nil {
		t.Fatal(err)
	}
	want := store.Change{Version: store.Version{Seq: 1, Tag: 2}, Kind: store.Restored, Partition: "p", Epoch: 5}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("decodeChangeTo = %+v; want %+v", c, want)
	}
}
