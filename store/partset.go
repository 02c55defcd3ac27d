package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Kinds of group. A group takes the kind of the first member that names
// one (SetPartitions with PartitionSet.Kind) and keeps it until it is
// deleted: a member of the other kind is refused with ErrGroupKind, so two
// fleets that picked the same group name cannot take each other's work.
const (
	// KindPartitions: a group of partitions, each run by a handler as
	// long as a member owns it (herd.Join, herd run).
	KindPartitions = "partitions"
	// KindKeys: a group of keys run on a schedule, each record a job's
	// blackboard entry (package jobs, herd jobs).
	KindKeys = "keys"
)

// ValidateKind checks a group kind: "" (none named) or one of the kinds.
func ValidateKind(kind string) error {
	switch kind {
	case "", KindPartitions, KindKeys:
		return nil
	}
	return fmt.Errorf("group kind %q is not %q or %q: %w", kind, KindPartitions, KindKeys, ErrInvalid)
}

// SetMode says when SetPartitions writes the set it is given.
type SetMode int

const (
	// SetReplace stores the set in place of the stored one. A set equal
	// to the stored one is not written again (nothing is logged): the
	// store compares digests, so the call costs it O(1) whatever the size
	// of the set.
	SetReplace SetMode = iota
	// SetIfAbsent stores the set only if the group holds none; a stored
	// set is kept, different or not (SetResult says which).
	SetIfAbsent
	// SetKindOnly stores no set (PartitionSet.Partitions is ignored): the
	// call only checks the group's kind, and gives it one if it has none.
	SetKindOnly
)

// PartitionSet is what SetPartitions is asked to do.
type PartitionSet struct {
	// Kind, if not "", is the kind of group the caller belongs to: a
	// group without a kind takes it; a group of another kind refuses the
	// call with ErrGroupKind and nothing is written. "" leaves the kind
	// alone (operator tools that set any group's partitions).
	Kind string
	// Partitions is the set to store (nil is the empty set).
	Partitions []Partition
	// Mode: SetReplace (the zero value), SetIfAbsent or SetKindOnly.
	Mode SetMode
}

// SetResult says what SetPartitions found and did.
type SetResult struct {
	// Kind is the group's kind after the call ("" if it has none).
	Kind string
	// Stored: the group holds a partition set after the call (perhaps an
	// empty one).
	Stored bool
	// Same: the stored set equals the one given (written by the call or
	// already there). False with SetKindOnly.
	Same bool
	// Written: the call stored the set given, and logged PartitionsSet.
	Written bool
	// Replaced: Written, over a different set the group held.
	Replaced bool
}

// Digest is the digest a store keeps with a partition set, so that a set
// equal to the stored one is recognised without being compared, or even
// sent, whole: a hash of the ids and weights in id order (the order
// SetPartitions is given them in does not matter), 32 hex digits.
func Digest(ps []Partition) string {
	sorted := slices.Clone(ps)
	slices.SortFunc(sorted, func(a, b Partition) int { return strings.Compare(a.ID, b.ID) })
	h := sha256.New()
	var buf []byte
	for _, p := range sorted {
		// An id holds no control character (ValidateID), so \x00 ends it.
		buf = append(buf[:0], p.ID...)
		buf = append(buf, 0)
		buf = strconv.AppendInt(buf, int64(p.Weight), 10)
		buf = append(buf, '\n')
		h.Write(buf)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// ValidateSet checks a SetPartitions request: its kind, its mode and (but
// with SetKindOnly) its partitions (ValidatePartitions).
func ValidateSet(set PartitionSet) error {
	if err := ValidateKind(set.Kind); err != nil {
		return err
	}
	switch set.Mode {
	case SetReplace, SetIfAbsent:
		return ValidatePartitions(set.Partitions)
	case SetKindOnly:
		return nil
	}
	return fmt.Errorf("set mode %d is not one of SetReplace, SetIfAbsent, SetKindOnly: %w", set.Mode, ErrInvalid)
}

// GroupSet is what a store holds of a group's partition set, for
// DecideSet: its kind ("" if none), whether a set is stored, and the
// set's digest ("" if unknown: stored by a version that kept none).
type GroupSet struct {
	Kind   string
	Stored bool
	Digest string
}

// DecideSet is the rule of SetPartitions every backend applies to what it
// holds, in the same atomic operation as the write: whether to write the
// set whose digest is digest, the result if it does (or does not), and
// ErrGroupKind if the group is of another kind. A backend that writes sets
// cur.Kind to res.Kind.
func DecideSet(group string, cur GroupSet, set PartitionSet, digest string) (write bool, res SetResult, err error) {
	if set.Kind != "" && cur.Kind != "" && set.Kind != cur.Kind {
		return false, SetResult{Kind: cur.Kind, Stored: cur.Stored}, KindError(group, cur.Kind, set.Kind)
	}
	res = SetResult{Kind: cur.Kind, Stored: cur.Stored}
	if res.Kind == "" {
		res.Kind = set.Kind
	}
	if set.Mode == SetKindOnly {
		return false, res, nil
	}
	res.Same = cur.Stored && cur.Digest == digest
	switch {
	case res.Same:
		return false, res, nil
	case cur.Stored && set.Mode == SetIfAbsent:
		return false, res, nil
	}
	res.Stored, res.Same, res.Written, res.Replaced = true, true, true, cur.Stored
	return true, res, nil
}

// KindError is the error of a member of kind want refused by a group of
// kind have: it wraps ErrGroupKind and says what to do.
func KindError(group, have, want string) error {
	return fmt.Errorf("group %q is a group of %s, and this member is one of %s: %w; "+
		"two fleets must not share a group name: pick another group, or delete the group first",
		group, kindNoun(have), kindNoun(want), ErrGroupKind)
}

func kindNoun(kind string) string {
	switch kind {
	case KindPartitions:
		return "partitions (herd run, herd.Join)"
	case KindKeys:
		return "scheduled keys (herd jobs, package jobs)"
	}
	return strconv.Quote(kind)
}
