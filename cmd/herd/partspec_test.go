package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A range bound of 10 or more digits is a range out of bounds, refused
// as the other out-of-range specs are, by every command that reads a
// SPEC; it used to be taken for one partition named "0-99999999999".
func TestSpecRangeBoundTooLong(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "herd.db")
	const want = "more than 100,000 partitions"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"partitions set", nil, []string{"partitions", "set", "--store", db, "--group", "g", "0-99999999999"}},
		{"run --partitions", nil, []string{"run", "--store", db, "--group", "g", "--partitions", "0-99999999999", "--", "true"}},
		{"HERD_PARTITIONS", []string{"HERD_PARTITIONS=0-99999999999"}, []string{"run", "--store", db, "--group", "g", "--", "true"}},
		{"run, 20 digits", nil, []string{"run", "--store", db, "--group", "g", "--partitions", "1-99999999999999999999", "--", "true"}},
		{"jobs --keys", nil, []string{"jobs", "--store", db, "--group", "g", "--every", "1m", "--keys", "0-99999999999", "--", "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runHerdBin(t, dir, tc.env, tc.args...)
			noun := "partitions"
			if tc.name == "jobs --keys" {
				noun = "keys"
			}
			if r.code == 0 || !strings.Contains(r.stderr, strings.Replace(want, "partitions", noun, 1)) {
				t.Fatalf("herd %q: exit %d, stderr %q; want an error containing %q", tc.args, r.code, r.stderr, want)
			}
		})
	}
	// Nothing was written (nor even created).
	if _, err := os.Stat(filepath.Join(dir, "herd.db")); err == nil {
		t.Errorf("herd.db exists after commands that all failed their checks")
	}

	for spec, want := range map[string]string{
		"1000000000-1000000001": `range "1000000000-1000000001": a bound above 999,999,999`,
		"5-99999999999":         "more than 100,000 partitions",
	} {
		if _, err := parsePartitionSpec("SPEC", spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("SPEC %q: %v; want an error containing %q", spec, err, want)
		}
	}
	// Within the bound, numbers of 9 digits are a range as before.
	if ps, err := parsePartitionSpec("SPEC", "999999998-999999999"); err != nil || len(ps) != 2 || ps[1].ID != "999999999" {
		t.Errorf("SPEC 999999998-999999999: %v, %v", ps, err)
	}
}
