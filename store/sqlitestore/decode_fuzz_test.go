package sqlitestore

import (
	"database/sql"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/herdhq/herd/store"
)

// Fuzz targets of what this package decodes from the file: log rows and
// their partition sets, and store URLs (docs/fuzzing.md).

// FuzzPartitionSet decodes a PartitionsSet entry's set: a set that decodes
// holds valid ids and weights, and encodes to a set that decodes the same.
func FuzzPartitionSet(f *testing.F) {
	f.Add(encodePartitions(store.Change{Kind: store.PartitionsSet, Partitions: []store.Partition{{ID: "a", Weight: 1}, {ID: "b c", Weight: 0}}}))
	f.Add("")
	f.Add("a\t-1\n")
	f.Add("a\t1\n\nb\t2")
	f.Fuzz(func(t *testing.T, s string) {
		ps, ok := decodePartitions(s)
		if !ok {
			return
		}
		for _, p := range ps {
			if p.Weight < 0 || store.ValidateID("partition", p.ID) != nil {
				t.Fatalf("decodePartitions(%q) accepted %+v", s, p)
			}
		}
		again := encodePartitions(store.Change{Kind: store.PartitionsSet, Partitions: ps})
		ps2, ok := decodePartitions(again)
		if !ok || !reflect.DeepEqual(ps2, ps) {
			t.Fatalf("decodePartitions(%q) = %+v; encoded as %q, decodes as %+v, %v", s, ps, again, ps2, ok)
		}
	})
}

// FuzzLogRow checks a log row: no panic, and a row it accepts has what
// its kind needs.
func FuzzLogRow(f *testing.F) {
	const s = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	// at: the row's time in µs, 0 for a row written by a herd before it.
	f.Add(int(store.SessionOpened), s, "m", 1, "", uint64(0), "", "", false, int64(1_700_000_000_000_000))
	f.Add(int(store.Claimed), s, "m", 0, "p", uint64(3), "", "", false, int64(0))
	f.Add(int(store.Released), s, "", 0, "p", uint64(3), s, "", false, int64(-1))
	f.Add(int(store.PartitionsSet), "", "", 0, "", uint64(0), "", "a\t1\n", true, int64(1_700_000_000_000_000))
	f.Fuzz(func(t *testing.T, kind int, session, member string, weight int, partition string, epoch uint64, givenBack, parts string, valid bool, at int64) {
		c := store.Change{Kind: store.ChangeKind(kind), Session: session, Member: member, Weight: weight,
			Partition: partition, Epoch: epoch, GivenBack: givenBack, At: logTime(at)}
		if (at > 0) == c.At.IsZero() || at > 0 && c.At.UnixMicro() != at {
			t.Fatalf("logTime(%d) = %v", at, c.At)
		}
		if err := decodeEntry(&c, sql.NullString{String: parts, Valid: valid}); err != nil {
			return
		}
		switch c.Kind {
		case store.Claimed, store.Released, store.Restored:
			if c.Epoch == 0 || store.ValidateID("partition", c.Partition) != nil {
				t.Fatalf("decodeEntry accepted %+v", c)
			}
		case store.SessionOpened:
			if c.Weight < 0 {
				t.Fatalf("decodeEntry accepted %+v", c)
			}
		case store.PartitionsSet:
			if !slices.IsSortedFunc(c.Partitions, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) }) {
				t.Fatalf("decodeEntry: partitions not sorted: %+v", c.Partitions)
			}
		}
	})
}

// FuzzURL parses sqlite:// URLs: every error wraps ErrInvalid; a path
// that parses is absolute and holds no NUL byte.
func FuzzURL(f *testing.F) {
	for _, s := range []string{"sqlite://herd.db", "sqlite:///abs/herd.db", "sqlite:///a%20b.db?network_fs=allow",
		"sqlite://~/x.db", "sqlite://:memory:", "sqlite:///x.db?network_fs=refuse&x=1", "sqlite:///a%00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		path, _, err := parseURL(raw)
		if err != nil {
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("parseURL(%q): %v; want ErrInvalid", raw, err)
			}
			return
		}
		if !strings.HasPrefix(path, "/") || strings.ContainsRune(path, 0) {
			t.Fatalf("parseURL(%q) = %q", raw, path)
		}
	})
}
