package dashboard

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
)

// The blackboard of a jobs group (store.KindKeys), as herd status --jobs
// reads it (jobs.Blackboard): every key of the set with its live owner and
// the record its runs write in the checkpoint. The refresher builds it
// from the read it makes anyway, so a jobs group costs no extra read.

// maxJobError bounds a record's error text on the page.
const maxJobError = 300

// jobRow is one key's line. Times are Unix milliseconds as the record's
// writer wrote them (its clock), 0 for none.
type jobRow struct {
	Key   string `json:"key"`
	Owner string `json:"owner"` // the member that owns the key now, "" if none
	// Running: the record says a run is under way, written by the key's
	// owner under its current epoch. StoppedMidRun: the record says
	// running but its writer no longer holds the key (it crashed or lost
	// it): the owner runs the slot again.
	Running       bool   `json:"running"`
	StoppedMidRun bool   `json:"stoppedMidRun"`
	LastStart     int64  `json:"lastStart"`
	LastStop      int64  `json:"lastStop"`
	Result        string `json:"result"` // ok, error, interrupted; "" before the first run ended
	Error         string `json:"error,omitempty"`
	NextDue       int64  `json:"nextDue"`
	Retry         bool   `json:"retry"`
	// Paused: the key's scheduled runs are skipped (a request to pause,
	// written into its record by its owner).
	Paused bool `json:"paused"`
	// LateMs is how late the last run started after its due time (start
	// minus slot, both the writer's clock); OverdueMs how long past its
	// next due time a key that is not running was when the dashboard read
	// it (the dashboard's clock against the writer's), 0 if not due yet.
	LateMs    int64  `json:"lateMs"`
	OverdueMs int64  `json:"overdueMs"`
	Missed    uint64 `json:"missed"`
	Runs      uint64 `json:"runs"`
	Failures  uint64 `json:"failures"`
	Takeovers uint64 `json:"takeovers"`
	// RecordError says why the key's record could not be read ("" if it
	// could, or there is none).
	RecordError string `json:"recordError,omitempty"`
}

// blackboard builds the rows of one read.
type blackboard struct {
	rows  []jobRow
	epoch []uint64 // the owner's epoch per row, 0 if no live owner
	now   time.Time
}

// newBlackboard starts the rows of snap's keys with their live owners.
func newBlackboard(snap *store.Snapshot, now time.Time) *blackboard {
	b := &blackboard{rows: make([]jobRow, len(snap.Partitions)), epoch: make([]uint64, len(snap.Partitions)), now: now}
	o := 0 // Owners and Partitions are both sorted by id
	for i, p := range snap.Partitions {
		b.rows[i].Key = p.ID
		for o < len(snap.Owners) && snap.Owners[o].Partition < p.ID {
			o++
		}
		if o < len(snap.Owners) && snap.Owners[o].Partition == p.ID {
			if r := snap.Owners[o]; r.Session != "" && snap.Alive(r.Session) {
				b.rows[i].Owner, b.epoch[i] = r.Member, r.Epoch
			}
		}
	}
	return b
}

// record fills row i from its key's record.
func (b *blackboard) record(i int, r *store.Record) {
	if len(r.Checkpoint) == 0 {
		return
	}
	row := &b.rows[i]
	rec, err := jobs.DecodeRecord(r.Checkpoint)
	if err != nil {
		row.RecordError = capText(err.Error(), maxJobError)
		return
	}
	current := row.Owner != "" && rec.Epoch == b.epoch[i]
	row.Running = rec.Running && current
	row.StoppedMidRun = rec.Running && !current
	row.LastStart, row.LastStop, row.NextDue = unixMs(rec.LastStart), unixMs(rec.LastStop), unixMs(rec.NextDue)
	row.Result, row.Error, row.Retry, row.Paused = rec.Result, capText(rec.Error, maxJobError), rec.Retry, rec.Paused
	if !rec.LastStart.IsZero() && !rec.Slot.IsZero() && rec.LastStart.After(rec.Slot) {
		row.LateMs = rec.LastStart.Sub(rec.Slot).Milliseconds()
	}
	if !rec.Running && !rec.Paused && !rec.NextDue.IsZero() && b.now.After(rec.NextDue) {
		row.OverdueMs = b.now.Sub(rec.NextDue).Milliseconds()
	}
	row.Missed, row.Runs, row.Failures, row.Takeovers = rec.Missed, rec.Runs, rec.Failures, rec.Takeovers
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// capText is s cut to n bytes at a rune boundary, "…" marking a cut.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return strings.TrimSpace(s) + "…"
}
