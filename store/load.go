package store

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Loads: how members publish the measured load of the partitions they run.
//
// A load report (Store.ReportLoads) is an entry of the group's log
// (LoadsReported) carrying a list of partition→load, written by the live
// session that runs them. Members already follow the log (Changes), so every
// member's copy of the group learns every report with the reads it already
// makes, at no store operation of its own. The store also keeps the latest
// load reported for each partition, and Snapshot returns them
// (Snapshot.Loads), so a member that joins, a view, and the next owner of a
// partition that moved start from the published value. A report changes
// no record, session or partition set; a load outlives its partition's
// owner and its removal from the set, as the record does, until DeleteGroup.
//
// A load is a number >= 0 in whatever unit the group's members measure
// (progress marks per second, CPU seconds per second): the balance only
// compares loads with each other.

// Load is one partition's latest published load.
type Load struct {
	Partition string
	Load      float64
}

// MaxLoads bounds the loads of one report (Store.ReportLoads): a member
// running more partitions whose loads changed reports the rest in its next
// reports. At about 24 bytes a load, a report is at most about 24 KB.
const MaxLoads = 1000

// MaxLoad bounds a load's value; loads are compared, not summed by the
// store, and no measure comes near it.
const MaxLoad = 1e15

// ValidateReportLoads checks ReportLoads' arguments: a valid group and
// session id, 1 to MaxLoads loads, each a valid partition id, listed once,
// with a finite load from 0 to MaxLoad.
func ValidateReportLoads(group, session string, loads []Load) error {
	if err := ValidateGroup(group); err != nil {
		return err
	}
	if err := ValidateID("session", session); err != nil {
		return err
	}
	return ValidateLoads(loads)
}

// ValidateLoads checks a report's loads alone (ValidateReportLoads without
// the group and session): a backend decoding a LoadsReported entry checks
// it with it.
func ValidateLoads(loads []Load) error {
	if len(loads) == 0 || len(loads) > MaxLoads {
		return fmt.Errorf("a load report has %d loads; it takes 1 to %d (report the rest next time): %w", len(loads), MaxLoads, ErrInvalid)
	}
	seen := make(map[string]struct{}, len(loads))
	for _, l := range loads {
		if err := ValidateID("partition", l.Partition); err != nil {
			return err
		}
		if _, dup := seen[l.Partition]; dup {
			return fmt.Errorf("a load report lists partition %q twice: %w", l.Partition, ErrInvalid)
		}
		seen[l.Partition] = struct{}{}
		if math.IsNaN(l.Load) || l.Load < 0 || l.Load > MaxLoad {
			return fmt.Errorf("load %v of partition %q is not a number from 0 to %g: %w", l.Load, l.Partition, MaxLoad, ErrInvalid)
		}
	}
	return nil
}

// FormatLoad is how backends write a load as text: the shortest decimal
// that reads back as the same float64 (ParseLoad), so that a snapshot and
// a replica that applied the log hold the same value.
func FormatLoad(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// ParseLoad reads a load FormatLoad wrote; ErrCorrupt if it is not one.
func ParseLoad(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v > MaxLoad {
		return 0, fmt.Errorf("load %q is not a number from 0 to %g: %w", short(s), MaxLoad, ErrCorrupt)
	}
	return v, nil
}

// LoadEntry is one load of a report's log entry as a backend that
// writes it as text keeps it (pgstore, sqlitestore): "<partition>\t<load>"
// (FormatLoad). A partition id holds no control character (ValidateID).
func LoadEntry(l Load) string { return l.Partition + "\t" + FormatLoad(l.Load) }

// ParseLoadEntries reads the loads of a report's log entry, each written
// by LoadEntry ("" entries are skipped): sorted by partition and checked
// by ValidateLoads. An error says which entry does not decode.
func ParseLoadEntries(entries iter.Seq[string]) ([]Load, error) {
	var out []Load
	for e := range entries {
		if e == "" {
			continue
		}
		id, v, ok := strings.Cut(e, "\t")
		l, err := ParseLoad(v)
		if !ok || err != nil {
			return nil, fmt.Errorf("load %q is not <partition>\\t<load>", short(e))
		}
		out = append(out, Load{Partition: id, Load: l})
	}
	SortLoads(out)
	return out, ValidateLoads(out)
}

// ReportChange returns the log entry of a report of loads by session
// (Version left zero): its loads sorted by partition, in a slice of its
// own.
func ReportChange(session string, loads []Load) Change {
	ls := slices.Clone(loads)
	SortLoads(ls)
	return Change{Kind: LoadsReported, Session: session, Loads: ls}
}

// SortLoads sorts loads by partition.
func SortLoads(loads []Load) {
	slices.SortFunc(loads, func(a, b Load) int { return strings.Compare(a.Partition, b.Partition) })
}

// MergeLoads returns cur (sorted by partition, read-only) with each of
// loads set: a partition of loads that cur has gets its new value, the
// others are added. It returns a new slice, never changing cur, in
// O(len(cur) + k log k) for k loads.
func MergeLoads(cur, loads []Load) []Load {
	add := slices.Clone(loads)
	SortLoads(add)
	out := make([]Load, 0, len(cur)+len(add))
	i, j := 0, 0
	for i < len(cur) || j < len(add) {
		switch {
		case j == len(add) || i < len(cur) && cur[i].Partition < add[j].Partition:
			out = append(out, cur[i])
			i++
		case i == len(cur) || add[j].Partition < cur[i].Partition:
			out = append(out, add[j])
			j++
		default:
			out = append(out, add[j])
			i, j = i+1, j+1
		}
	}
	return out
}

// LoadOf returns the latest published load of partition id in s, and
// whether there is one.
func (s *Snapshot) LoadOf(id string) (float64, bool) {
	i, ok := slices.BinarySearchFunc(s.Loads, id, func(l Load, id string) int { return strings.Compare(l.Partition, id) })
	if !ok {
		return 0, false
	}
	return s.Loads[i].Load, true
}
