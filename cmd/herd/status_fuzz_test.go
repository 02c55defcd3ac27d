package main

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// FuzzStatusJSON decodes any bytes as a herd status --json document: one
// that decodes encodes to a document that decodes as the same report
// (docs/fuzzing.md).
func FuzzStatusJSON(f *testing.F) {
	s, m, e, n, age, str := "S", "m", uint64(7), 12, int64(1500), "2026-03-29T01:30:00Z"
	rep := statusReport{Store: "redis://127.0.0.1:6379/0", Time: time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC),
		Groups: []groupStatus{{
			Group: "orders", Kind: "partitions", PartitionSetStored: true,
			Counts:     statusCounts{Partitions: 2, Running: 1, Unowned: 1},
			Members:    []memberStatus{{Member: m, Session: s, Weight: 1, TTLLeftMS: 900, Owned: 1, Partitions: []string{"0"}}},
			Listed:     listedAll,
			Partitions: []partitionStatus{{Partition: "0", InSet: true, State: stateRunning, Member: &m, Session: &s, Epoch: &e, SinceMS: &age, CheckpointBytes: &n}},
			Malformed:  []malformedStatus{{Kind: "ownership", ID: "x", Reason: "bad"}},
			JobsCounts: &jobsCounts{Keys: 1}, JobsListed: &str, JobsNotListed: &n,
			Jobs: []jobStatus{{Key: "k", Owner: &m, Epoch: &e, Slot: &str, Attempt: 1, Runs: 2}},
		}}}
	b, err := json.Marshal(rep)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"store":"mem://","time":"2026-03-29T02:30:00.5+01:00","groups":null}`))
	f.Add([]byte(`{"groups":[{"error":"boom","partitions":[],"members":[{"partitions":null}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r statusReport
		if err := json.Unmarshal(b, &r); err != nil {
			return
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("%q decodes as %+v, which does not encode: %v", b, r, err)
		}
		var got statusReport
		err = json.Unmarshal(enc, &got)
		// The same instant may come back in another *time.Location (an
		// offset of +00:00 parses as Local where Local is UTC, and encodes
		// as Z): compare instants, then the rest.
		sameTime := got.Time.Equal(r.Time)
		got.Time, r.Time = time.Time{}, time.Time{}
		if err != nil || !sameTime || !reflect.DeepEqual(got, r) {
			t.Fatalf("%q decodes as %+v; encoded as %s, decodes as %+v (same instant: %v), %v", b, r, enc, got, sameTime, err)
		}
	})
}
