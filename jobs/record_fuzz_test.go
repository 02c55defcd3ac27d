package jobs

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// FuzzRecord decodes a key's record from any checkpoint bytes: every error
// wraps store.ErrCorrupt, and a record that decodes encodes to one that
// decodes as the same record (written at RecordVersion, its error text
// cut as encode cuts it) (docs/fuzzing.md).
func FuzzRecord(f *testing.F) {
	at := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)
	for _, r := range []Record{
		{Owner: "m1", Epoch: 7, Running: true, Slot: at, Attempt: 1, LastStart: at},
		{Owner: "m2", Epoch: 9, Slot: at, Attempt: 2, LastStart: at, LastStop: at.Add(time.Second), Result: ResultError,
			Error: "boom", Runs: 3, Failures: 1, Takeovers: 1, Missed: 2, NextDue: at.Add(time.Minute), Retry: true},
	} {
		b, err := r.encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"v":0}`))
	f.Add([]byte(`{"v":2,"attempt":-1}`))
	f.Add([]byte(`{"v":1,"slot":"2026-03-29T02:30:00+01:00","future":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("DecodeRecord(%q): %v; want ErrCorrupt", b, err)
			}
			return
		}
		if r == (Record{}) {
			return // nothing stored
		}
		enc, err := r.encode()
		if err != nil {
			t.Fatalf("DecodeRecord(%q) = %+v, which does not encode: %v", b, r, err)
		}
		got, err := DecodeRecord(enc)
		want := r
		want.V = RecordVersion
		if len(want.Error) > maxErrorText {
			want.Error = want.Error[:maxErrorText] + "...(cut)"
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeRecord(%q) = %+v; encoded as %s, decodes as %+v, %v", b, r, enc, got, err)
		}
	})
}
