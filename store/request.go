package store

import (
	"fmt"
)

// Requests: how something that owns nothing (an operator, through the
// dashboard) asks the owner of a key or a member to act.
//
// A request is an entry of the group's log (Requested), appended by
// Store.Request without a session and without a fence: whoever may write to
// the store may request. It changes no record. Members already follow the
// log (Changes), so a request reaches every live member within the time a
// change does, at no store operation of its own for members at rest. The
// one it names acts on it under its own session and epoch, as it acts on
// anything else: the requester never writes a fenced record.
//
// A request is acted on by whoever owns its target when its entry reaches
// that owner's copy of the group; it is not kept for a later owner. A
// request for a key nobody owns, or for a member that is not running, is
// dropped (the entry stays in the log, as history). Members that join later
// start from a snapshot and never see earlier requests. What a request
// changes for good (a key paused) its owner writes into the key's record,
// under its epoch, so that the key's next owner keeps it.

// Actions of a request (Request.Action, Change.Action).
const (
	// RequestRun: the owner of key Partition runs it now, once, whatever
	// its schedule (a jobs group).
	RequestRun = "run"
	// RequestPause: the owner of key Partition skips the key's scheduled
	// runs until it is resumed, and records that it is paused.
	RequestPause = "pause"
	// RequestResume: the owner of key Partition runs it on its schedule
	// again, from the next slot on.
	RequestResume = "resume"
	// RequestLeave: every running member whose id is Member leaves the
	// group gracefully, as on Leave.
	RequestLeave = "leave"
)

// Request is what Store.Request logs: an Action and its target, the key
// (Partition) for RequestRun, RequestPause and RequestResume, the member
// (Member) for RequestLeave. The other target is empty.
type Request struct {
	Action    string
	Partition string
	Member    string
}

// ValidateRequest checks Request's arguments: a valid group, a known
// action, the target it takes a valid id, the other target empty.
func ValidateRequest(group string, r Request) error {
	if err := ValidateGroup(group); err != nil {
		return err
	}
	return r.Validate()
}

// Validate checks a request alone (ValidateRequest without the group): a
// backend decoding a Requested entry checks it with it.
func (r Request) Validate() error {
	switch r.Action {
	case RequestRun, RequestPause, RequestResume:
		if r.Member != "" {
			return fmt.Errorf("request %q names a member (%q); it takes a key: %w", r.Action, r.Member, ErrInvalid)
		}
		return ValidateID("partition", r.Partition)
	case RequestLeave:
		if r.Partition != "" {
			return fmt.Errorf("request %q names a key (%q); it takes a member: %w", r.Action, r.Partition, ErrInvalid)
		}
		return ValidateID("member", r.Member)
	}
	return fmt.Errorf("request action %q is none of %q, %q, %q, %q: %w",
		short(r.Action), RequestRun, RequestPause, RequestResume, RequestLeave, ErrInvalid)
}

// short quotes at most 64 bytes of s, for errors about a bad value.
func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Change returns the log entry of r (Version left zero).
func (r Request) Change() Change {
	return Change{Kind: Requested, Action: r.Action, Partition: r.Partition, Member: r.Member}
}

// Request returns the request a Requested entry records.
func (c Change) Request() Request {
	return Request{Action: c.Action, Partition: c.Partition, Member: c.Member}
}
