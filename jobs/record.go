package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/herdhq/herd/store"
)

// RecordVersion is the version of the record format this package writes.
// Later versions only add fields, so a reader reads the fields it knows of
// any version from 1 up.
const RecordVersion = 1

// Results of a run, as Record.Result holds them.
const (
	ResultOK          = "ok"          // Run returned nil
	ResultError       = "error"       // Run returned an error, panicked or timed out
	ResultInterrupted = "interrupted" // the key was handed off during the run and Run returned an error
)

// Record is a key's entry on the blackboard: what ran where and when. It is
// the checkpoint of the key's partition, JSON-encoded, written by the
// key's owner with a fenced write before and after every run.
type Record struct {
	V       int    `json:"v"`     // the format's version (RecordVersion when written)
	Owner   string `json:"owner"` // the member that wrote the record
	Epoch   uint64 `json:"epoch"` // the owner's epoch for the key when it wrote the record
	Running bool   `json:"running"`
	// Slot is the due time of the current or last run, and Attempt its
	// attempt at that slot (1, then more after failures and takeovers).
	Slot      time.Time `json:"slot"`
	Attempt   int       `json:"attempt"`
	LastStart time.Time `json:"last_start"`
	LastStop  time.Time `json:"last_stop,omitzero"` // zero until a run has ended
	// Result is that of the last run that ended (ResultOK, ResultError,
	// ResultInterrupted), "" before the first; Error is its error text.
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
	// Runs counts runs ended, whatever their result; Failures those that
	// ended in an error; Takeovers the runs started again because their
	// owner stopped in the middle (crashed, or lost the key); Missed the
	// slots that never got a run of their own because a later slot was due
	// already (the fleet was down, or runs took longer than the interval).
	Runs      uint64 `json:"runs"`
	Failures  uint64 `json:"failures"`
	Takeovers uint64 `json:"takeovers,omitempty"`
	Missed    uint64 `json:"missed"`
	// NextDue is when the next run is due, as its writer computed it (zero
	// while a run is under way). Retry says the next run is another
	// attempt at Slot, after a failure or an interruption.
	NextDue time.Time `json:"next_due,omitzero"`
	Retry   bool      `json:"retry,omitempty"`
	// Paused says the key's scheduled runs are skipped, after a request
	// to pause (store.RequestPause) until one to resume: its owner writes
	// it, so the key's next owner keeps it paused. A run on request
	// (store.RequestRun) still runs.
	Paused bool `json:"paused,omitempty"`
}

// DecodeRecord decodes a key's record from its partition's checkpoint. A
// nil or empty checkpoint (a key that never ran) gives the zero Record and
// no error. Anything that is not a record of version 1 or later gives an
// error wrapping store.ErrCorrupt.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	if len(bytes.TrimSpace(b)) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("jobs: record is not JSON of a job record (%s): %w", short(err.Error()), store.ErrCorrupt)
	}
	if r.V < 1 {
		return Record{}, fmt.Errorf("jobs: record has no version (\"v\" is %d; want %d or later): %w", r.V, RecordVersion, store.ErrCorrupt)
	}
	if r.Attempt < 0 {
		return Record{}, fmt.Errorf("jobs: record has a negative attempt %d: %w", r.Attempt, store.ErrCorrupt)
	}
	for _, t := range []*time.Time{&r.Slot, &r.LastStart, &r.LastStop, &r.NextDue} {
		utcIfZeroOffset(t)
	}
	return r, nil
}

// utcIfZeroOffset gives a time at offset zero the UTC location, as its
// encoding ("Z") decodes: "+00:00" written by another program decodes in
// Local where Local is UTC, and the record would not decode as it encodes.
func utcIfZeroOffset(t *time.Time) {
	if _, off := t.Zone(); off == 0 && t.Location() != time.UTC {
		*t = t.UTC()
	}
}

// maxErrorText bounds the error text a record keeps, so that a run
// returning a huge error cannot make its record too large to write.
const maxErrorText = 4 << 10

// encode returns the record's checkpoint value. It fails only for a time
// outside the years 0-9999 (a schedule returning such a time).
func (r Record) encode() ([]byte, error) {
	r.V = RecordVersion
	if len(r.Error) > maxErrorText {
		r.Error = r.Error[:maxErrorText] + "...(cut)"
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("jobs: encoding the record: %w", err)
	}
	return b, nil
}

// short cuts s to 120 bytes, for errors quoting a decoder's message.
func short(s string) string {
	if len(s) <= 120 {
		return s
	}
	return s[:120] + "..."
}
