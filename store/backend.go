package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// What every backend does the same around its own database: the first
// step of a call, the checks of what it reads, and the partition set's
// two-step write for a backend whose database decides it.

// Begin is a call's first step, for a backend named backend ("pgstore")
// and its call op: args is the error of the call's Validate function
// (args.go), closed whether the store was closed. Every error wraps
// ErrInvalid (args) or ErrUnavailable (closed, ctx ended), and says which
// call it was. A nil ctx is an invalid argument (it would panic below).
func Begin(ctx context.Context, backend, op string, args error, closed bool) error {
	if args != nil {
		return fmt.Errorf("%s: %s: %w", backend, op, args)
	}
	if ctx == nil {
		return fmt.Errorf("%s: %s: nil context (pass context.Background() or a call's own): %w", backend, op, ErrInvalid)
	}
	if closed {
		return fmt.Errorf("%s: %s: store is closed: %w", backend, op, ErrUnavailable)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %s: %w: %w", backend, op, ErrUnavailable, err)
	}
	return nil
}

// InUseError is DeleteGroup's error for a group with live sessions and no
// force: it wraps ErrGroupInUse. The caller says what to do (herd group
// delete: stop the members, or --force).
func InUseError(group string, live int) error {
	return fmt.Errorf("group %q has %d live session(s): %w", group, live, ErrGroupInUse)
}

// CheckSession reports what is wrong with a live session a backend read,
// as herd never writes it (nil if nothing is): an id that is not a
// NewSessionID id, or a member id ValidateID refuses. For a backend whose
// session ids are NewSessionID's.
func CheckSession(id, member string) error {
	if !IsSessionID(id) {
		return errors.New("not a session id this store makes (26 characters of A-Z, 2-7)")
	}
	return ValidateID("member", member)
}

// BadRecord is the Malformed entry of a record of kind (MalformedSession,
// MalformedPartition, MalformedOwnership) and id that a backend read and
// could not use, for the reason given: the id is cut to MaxIDLength bytes
// (a field may be as long as the database allows).
func BadRecord(kind, id, reason string) Malformed {
	if len(id) > MaxIDLength {
		id = id[:MaxIDLength]
	}
	return Malformed{Kind: kind, ID: id, Reason: reason}
}

// SortMalformed sorts ms by kind, then id: the order of Snapshot.Malformed.
func SortMalformed(ms []Malformed) {
	slices.SortFunc(ms, func(a, b Malformed) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// SmallSet is the largest partition set SendSet sends whole at once: a
// smaller one costs less to send than a second round trip.
const SmallSet = 100

// SetStep is one request of SendSet to a backend's database.
type SetStep struct {
	Mode   string // "replace", "ifabsent" or "kindonly" (the set's SetMode)
	Digest string // the set's Digest ("" with SetKindOnly)
	Full   bool   // the set is sent whole, not its digest alone
}

// SetReply is what a backend's database answers a SetStep.
type SetReply struct {
	// Status: "ok", "kind" (the group is of another kind: nothing was
	// written) or "need" (the database holds another set: send it whole).
	Status string
	Kind   string // the group's kind after the step
	Stored bool   // the group holds a set after the step
	// What: "same" (the stored set is the one given), "written" or
	// "replaced" (it is now, written over none or another), or "" (the
	// stored set is kept, or no set was asked for).
	What string
}

// SendSet is SetPartitions on a backend whose database applies DecideSet's
// rule itself (a SQL function, a Lua script): send makes one request of
// the database. A set of more than SmallSet partitions is sent in two
// steps: its digest first, which is all the database needs when the stored
// set is the same (or is kept), then the whole set only if it answers
// "need". So a hundred members joining with the same set of 100,000
// partitions send it whole only while none is stored (a fresh group), and
// the database writes it once. op names the call in SendSet's own errors
// ("pgstore: SetPartitions"); the error of a group of another kind wraps
// ErrGroupKind. send's errors are returned as they are.
func SendSet(op, group string, set PartitionSet, send func(SetStep) (SetReply, error)) (SetResult, error) {
	step := SetStep{Mode: "replace"}
	switch set.Mode {
	case SetIfAbsent:
		step.Mode = "ifabsent"
	case SetKindOnly:
		step.Mode = "kindonly"
	}
	if set.Mode != SetKindOnly {
		step.Digest = Digest(set.Partitions)
	}
	step.Full = set.Mode != SetKindOnly && len(set.Partitions) <= SmallSet
	for {
		reply, err := send(step)
		if err != nil {
			return SetResult{}, err
		}
		r := SetResult{Kind: reply.Kind, Stored: reply.Stored}
		switch {
		case reply.Status == "kind":
			return r, fmt.Errorf("%s: %w", op, KindError(group, reply.Kind, set.Kind))
		case reply.Status == "need" && !step.Full:
			step.Full = true
			continue
		case reply.Status != "ok":
			return SetResult{}, fmt.Errorf("%s: unexpected status %q from the database (tables or scripts of another version?)", op, short(reply.Status))
		}
		switch reply.What {
		case "same":
			r.Same = true
		case "written", "replaced":
			r.Same, r.Written, r.Replaced = true, true, reply.What == "replaced"
		}
		return r, nil
	}
}
