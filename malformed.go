package herd

import (
	"errors"
	"fmt"
	"slices"

	"github.com/herdhq/herd/store"
)

// malformedReports is what the reconcile loop reported of malformed
// records (Snapshot.Malformed) and of a corrupt group (ErrCorrupt), so
// that each is reported once.
type malformedReports struct {
	malformed   map[string]bool // malformed records already reported
	corruptSeen string          // the corrupt-group error already reported, "" if none
}

// maxLogID is how much of an id read from the store a log line shows.
const maxLogID = 64

// reportMalformed logs at WARN each malformed record the previous snapshot
// did not list.
func (m *Member) reportMalformed(ms []store.Malformed) {
	if len(ms) == 0 && len(m.reports.malformed) == 0 {
		return
	}
	now := make(map[string]bool, len(ms))
	for _, x := range ms {
		key := x.Kind + "\x00" + x.ID
		now[key] = true
		if m.reports.malformed[key] {
			continue
		}
		what := "left out until it is repaired or deleted"
		if x.Kind != store.MalformedSession {
			what = "its partition is not run until the record is repaired or deleted"
		}
		m.log.Warn("malformed record in the store: "+what, "kind", x.Kind, "id", logID(x.ID), "reason", logID(x.Reason))
	}
	m.reports.malformed = now
}

func logID(s string) string {
	if len(s) <= maxLogID {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q...(%d bytes)", s[:maxLogID], len(s))
}

// unplaceable returns parts without those whose record is malformed (no
// member claims them); parts itself if none, for plan's buffers to
// recognise the shared slice.
func unplaceable(parts []store.Partition, ms []store.Malformed) []store.Partition {
	bad := map[string]bool{}
	for _, x := range ms {
		if x.Kind == store.MalformedOwnership {
			bad[x.ID] = true
		}
	}
	isBad := func(p store.Partition) bool { return bad[p.ID] }
	if len(bad) == 0 || !slices.ContainsFunc(parts, isBad) {
		return parts
	}
	return slices.DeleteFunc(slices.Clone(parts), isBad)
}

// reconcileFailed logs a failed reconcile at WARN, but a group corrupt as a
// whole (every read fails the same way) only once until a read succeeds.
func (m *Member) reconcileFailed(err error) {
	if errors.Is(err, store.ErrCorrupt) {
		msg := err.Error()
		if m.reports.corruptSeen == msg {
			return
		}
		m.reports.corruptSeen = msg
		m.log.Warn("the group's records in the store cannot be read; retrying with back-off until they are repaired (logged once)", "err", err)
		return
	}
	m.log.Warn("reconcile failed; retrying", "err", err)
}

// corruptRepaired notes a successful read: a corrupt group is reported
// again if it breaks again.
func (m *Member) corruptRepaired() {
	if m.reports.corruptSeen != "" {
		m.log.Info("the group's records can be read again")
		m.reports.corruptSeen = ""
	}
}
