package jobs

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Owner: "m1", Epoch: 7, Running: true, Slot: t0, Attempt: 2, LastStart: t0.Add(time.Second),
		Result: ResultError, Error: "boom", Runs: 3, Failures: 1, Missed: 4, NextDue: t0.Add(time.Hour), Retry: true}
	b, err := r.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	r.V = RecordVersion
	if got != r {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
	}
	if !strings.Contains(string(b), `"v":1`) || strings.Contains(string(b), "last_stop") {
		t.Errorf("encoding %s: want a version and no zero last_stop", b)
	}
	if z, err := DecodeRecord(nil); err != nil || z != (Record{}) {
		t.Errorf("DecodeRecord(nil) = %+v, %v", z, err)
	}
}

func TestRecordRejectsOthers(t *testing.T) {
	for _, b := range []string{"42", "not json", `{"owner":"m"}`, `{"v":1,"attempt":-1}`, `{"v":"1"}`} {
		if _, err := DecodeRecord([]byte(b)); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("DecodeRecord(%q) = %v; want ErrCorrupt", b, err)
		}
	}
	// A later version's record is read by the fields it shares.
	r, err := DecodeRecord([]byte(`{"v":2,"owner":"m","runs":5,"new_field":[1]}`))
	if err != nil || r.Owner != "m" || r.Runs != 5 {
		t.Errorf("version 2: %+v, %v", r, err)
	}
}

func TestRecordCutsLongErrors(t *testing.T) {
	b, err := Record{Error: strings.Repeat("x", 1<<20)}.encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 2*maxErrorText {
		t.Errorf("record of %d bytes for a 1 MiB error", len(b))
	}
}
