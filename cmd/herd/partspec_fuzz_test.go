package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/herdhq/herd/store"
)

// Fuzz targets of partition SPECs and @file lists (docs/fuzzing.md).

// idsOf is the ids of ps.
func idsOf(ps []store.Partition) []string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids
}

// checkIDs fails t unless ids are valid, unique partition ids, at most
// maxRunPartitions of them, each of weight 1 (a SPEC gives no weights).
func checkIDs(t *testing.T, spec string, ps []store.Partition) {
	t.Helper()
	checkParsed(t, spec, ps, 1)
}

// checkParsed fails t unless ps are valid, unique partition ids, at most
// maxRunPartitions of them, of weights from 1 to maxWeight.
func checkParsed(t *testing.T, spec string, ps []store.Partition, maxW int) {
	t.Helper()
	if len(ps) > maxRunPartitions {
		t.Fatalf("%q: %d partitions, over %d", spec, len(ps), maxRunPartitions)
	}
	seen := map[string]bool{}
	for _, p := range ps {
		if store.ValidateID("partition", p.ID) != nil || seen[p.ID] || p.Weight < 1 || p.Weight > maxW {
			t.Fatalf("%q: accepted %+v", spec, p)
		}
		seen[p.ID] = true
	}
}

// FuzzPartitionSpec parses a SPEC (not @file): what parses is a set of
// valid unique ids, and formatSpec writes them, if it can, as a SPEC that
// parses as the same ids in the same order.
func FuzzPartitionSpec(f *testing.F) {
	for _, s := range []string{"0-31", "a,b,c", "0-3,x", "", "1-0", "00-3", "0-999999999", "9223372036854775808-1",
		"a,a", ",", "-5", "1--2", "x y,z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if strings.HasPrefix(spec, "@") {
			return // FuzzPartitionFile
		}
		_ = specWarning("", spec)
		ps, err := parsePartitionSpec("SPEC", spec)
		if err != nil {
			return
		}
		checkIDs(t, spec, ps)
		ids := idsOf(ps)
		again, ok := formatSpec(ids)
		if !ok {
			return
		}
		ps2, err := parsePartitionSpec("SPEC", again)
		if err != nil || !slices.Equal(idsOf(ps2), ids) {
			t.Fatalf("%q parses as %q; written as %q, which parses as %q, %v", spec, ids, again, idsOf(ps2), err)
		}
	})
}

// FuzzPartitionFile parses an @file list: what parses is a set of valid
// unique ids of weights from 1 to maxWeight, each a line of the file (ID or
// ID<TAB>WEIGHT), and the partitions written one per line parse as the same
// partitions.
func FuzzPartitionFile(f *testing.F) {
	for _, s := range []string{"a\nb\n", "# ids\n\n 0 \n1\r\n", "a\na\n", "x\x00y\n", "#\n", strings.Repeat("a", 300),
		"a\t2\nb\n", "a\t0\n", "a\t1000001\n", "a\tx\n"} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte) {
		file, err := os.CreateTemp(dir, "ids")
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(file.Name())
		if _, err := file.Write(content); err != nil {
			t.Fatal(err)
		}
		file.Close()
		ps, err := parsePartitionSpec("SPEC", "@"+file.Name())
		if err != nil {
			return
		}
		checkParsed(t, string(content), ps, maxWeight)
		lines := make([]string, len(ps))
		for i, p := range ps {
			lines[i] = p.ID
			if p.Weight != 1 {
				lines[i] = fmt.Sprintf("%s\t%d", p.ID, p.Weight)
			}
		}
		if err := os.WriteFile(file.Name(), []byte(strings.Join(lines, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		ps2, err := parsePartitionSpec("SPEC", "@"+filepath.Clean(file.Name()))
		if err != nil || !slices.Equal(ps2, ps) {
			t.Fatalf("%q parses as %+v; written one per line, parses as %+v, %v", content, ps, ps2, err)
		}
	})
}
