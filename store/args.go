package store

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// The argument checks of the Store methods, one per method (or per shape
// of arguments). A backend calls the one for its method first, before it
// touches anything, and wraps the error with its name and the method's:
//
//	if err := store.ValidateClaimBatch(group, session, partitions); err != nil {
//		return nil, fmt.Errorf("mybackend: claim batch: %w", err)
//	}
//
// so every backend rejects the same arguments with ErrInvalid and the same
// words. A backend may add limits of its own database (pgstore: a weight
// must fit an int4), never remove one.

// ValidateGroup checks the group id of Snapshot, ExpireSessions and
// DeleteGroup.
func ValidateGroup(group string) error {
	return ValidateID("group", group)
}

// ValidateOpenSession checks OpenSession's arguments: the ids, a weight of
// 0 or more and a TTL above 0.
func ValidateOpenSession(group, member string, weight int, ttl time.Duration) error {
	if err := validateIDs("group", group, "member", member); err != nil {
		return err
	}
	if weight < 0 {
		return fmt.Errorf("session weight %d is negative: %w", weight, ErrInvalid)
	}
	return validateTTL(ttl)
}

// ValidateKeepAlive checks KeepAlive's arguments: the ids and a TTL above 0.
func ValidateKeepAlive(group, session string, ttl time.Duration) error {
	if err := validateIDs("group", group, "session", session); err != nil {
		return err
	}
	return validateTTL(ttl)
}

// ValidateCloseSession checks CloseSession's ids.
func ValidateCloseSession(group, session string) error {
	return validateIDs("group", group, "session", session)
}

// ValidateSetPartitions checks SetPartitions' arguments: the group id and
// the set (ValidateSet).
func ValidateSetPartitions(group string, set PartitionSet) error {
	if err := ValidateGroup(group); err != nil {
		return err
	}
	return ValidateSet(set)
}

// ValidateRecords checks Records' arguments: the group id and a batch
// (ValidateBatch).
func ValidateRecords(group string, partitions []string) error {
	if err := ValidateGroup(group); err != nil {
		return err
	}
	return ValidateBatch(partitions)
}

// ValidateClaimBatch checks ClaimBatch's arguments: the ids and a batch
// (ValidateBatch).
func ValidateClaimBatch(group, session string, partitions []string) error {
	if err := validateIDs("group", group, "session", session); err != nil {
		return err
	}
	return ValidateBatch(partitions)
}

// ValidateReleaseBatch checks ReleaseBatch's arguments: the ids, a batch of
// the held records' partitions (ValidateBatch) and their epochs.
func ValidateReleaseBatch(group, session string, held []Ownership) error {
	if err := validateIDs("group", group, "session", session); err != nil {
		return err
	}
	ids := make([]string, len(held))
	for i, o := range held {
		if err := ValidateEpoch(o.Epoch); err != nil {
			return fmt.Errorf("release of %q: %w", o.Partition, err)
		}
		ids[i] = o.Partition
	}
	return ValidateBatch(ids)
}

// ValidateGiveBack checks GiveBack's arguments: the ids and the epoch.
func ValidateGiveBack(group, partition, session string, epoch uint64) error {
	if err := validateIDs("group", group, "partition", partition, "session", session); err != nil {
		return err
	}
	return ValidateEpoch(epoch)
}

// ValidateCheckpoint checks the arguments of Checkpoint and Restore: the
// ids, the epoch and a value of at most MaxCheckpointLength bytes.
func ValidateCheckpoint(group, partition string, epoch uint64, value []byte) error {
	if err := validateIDs("group", group, "partition", partition); err != nil {
		return err
	}
	if err := ValidateEpoch(epoch); err != nil {
		return err
	}
	if len(value) > MaxCheckpointLength {
		return fmt.Errorf("checkpoint of %q is %d bytes, more than the limit of %d: %w",
			partition, len(value), MaxCheckpointLength, ErrInvalid)
	}
	return nil
}

// ValidateChanges checks Changes' arguments: the group id and max >= 1.
func ValidateChanges(group string, max int) error {
	if err := ValidateGroup(group); err != nil {
		return err
	}
	if max < 1 {
		return fmt.Errorf("max %d is less than 1: %w", max, ErrInvalid)
	}
	return nil
}

// validateIDs checks (kind, id) pairs with ValidateID.
func validateIDs(kindIDs ...string) error {
	for i := 0; i+1 < len(kindIDs); i += 2 {
		if err := ValidateID(kindIDs[i], kindIDs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func validateTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("session TTL %v is not positive: %w", ttl, ErrInvalid)
	}
	return nil
}

// SessionIDLength is the length of a NewSessionID id.
const SessionIDLength = 26

// NewSessionID returns a fresh session id for a backend that keeps no
// counter: 130 random bits in base32 (26 characters of A-Z, 2-7). It is
// unique for the life of the store without any state in it, so a store
// that lost its data (a Redis restarted empty, a schema or file made
// again) cannot make an id repeat; and it never contains ':' or any other
// separator a backend's encoding may rely on.
func NewSessionID() string { return rand.Text() }

// IsSessionID reports whether id has the form NewSessionID gives. A
// backend whose ids are NewSessionID's tells with it a session or a
// GivenBack mark it wrote from one written by something else (which it
// reports in Snapshot.Malformed, or reads as no mark).
func IsSessionID(id string) bool {
	if len(id) != SessionIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// ValidateID checks a group, member or partition id: non-empty, at most
// MaxIDLength bytes, valid UTF-8, and no control characters. Spaces, colons,
// slashes and any other printable Unicode are allowed; backends must
// encode them safely.
func ValidateID(kind, id string) error {
	if id != "" && len(id) <= MaxIDLength && printableASCII(id) {
		return nil // the common case, in one pass over the bytes
	}
	switch {
	case id == "":
		return fmt.Errorf("%s id is empty: %w", kind, ErrInvalid)
	case len(id) > MaxIDLength:
		return fmt.Errorf("%s id is %d bytes, more than the limit of %d: %w", kind, len(id), MaxIDLength, ErrInvalid)
	case !utf8.ValidString(id):
		return fmt.Errorf("%s id %q is not valid UTF-8: %w", kind, id, ErrInvalid)
	case strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%s id %q contains a control character: %w", kind, id, ErrInvalid)
	}
	return nil
}

// printableASCII reports whether id's bytes are all printable ASCII (0x20
// to 0x7e): valid UTF-8 without control characters, checked in one pass
// rather than rune by rune (a Snapshot checks every id it reads: see
// BenchmarkFleetDecodePartList in redisstore).
func printableASCII(id string) bool {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// ValidatePartitions checks a partition set: valid, unique ids and
// non-negative weights.
func ValidatePartitions(ps []Partition) error {
	seen := make(map[string]struct{}, len(ps))
	for _, p := range ps {
		if err := ValidateID("partition", p.ID); err != nil {
			return err
		}
		if p.Weight < 0 {
			return fmt.Errorf("partition %q has negative weight %d: %w", p.ID, p.Weight, ErrInvalid)
		}
		if _, dup := seen[p.ID]; dup {
			return fmt.Errorf("partition %q is listed twice: %w", p.ID, ErrInvalid)
		}
		seen[p.ID] = struct{}{}
	}
	return nil
}

// ValidateEpoch checks an epoch passed to ReleaseBatch, GiveBack, Checkpoint
// or Restore:
// epochs start at 1, so 0 is never one.
func ValidateEpoch(epoch uint64) error {
	if epoch == 0 {
		return fmt.Errorf("epoch 0 is not an epoch (epochs start at 1): %w", ErrInvalid)
	}
	return nil
}

// ValidateBatch checks the partitions of a ClaimBatch, ReleaseBatch or
// Records: at most MaxBatch, valid ids, none listed twice.
func ValidateBatch(partitions []string) error {
	if len(partitions) > MaxBatch {
		return fmt.Errorf("batch of %d partitions is more than the limit of %d: %w", len(partitions), MaxBatch, ErrInvalid)
	}
	seen := make(map[string]struct{}, len(partitions))
	for _, p := range partitions {
		if err := ValidateID("partition", p); err != nil {
			return err
		}
		if _, dup := seen[p]; dup {
			return fmt.Errorf("partition %q is listed twice in the batch: %w", p, ErrInvalid)
		}
		seen[p] = struct{}{}
	}
	return nil
}

// OpenWithNewID opens a session under a new id (NewSessionID): open writes
// the session under id and answers "ok", or "dup" if the id is taken, which
// tries another (three ids at most). op names the call in errors
// ("redisstore: OpenSession"); any other status is an error.
func OpenWithNewID(op string, open func(id string) (status string, err error)) (string, error) {
	for range 3 {
		id := NewSessionID()
		status, err := open(id)
		if err != nil {
			return "", err
		}
		switch status {
		case "ok":
			return id, nil
		case "dup":
			continue
		default:
			return "", fmt.Errorf("%s: unexpected status %q (mismatched script or schema version?)", op, status)
		}
	}
	return "", fmt.Errorf("%s: random session ids collided three times", op)
}

// CheckOwnership reports what is wrong with an ownership record a backend
// read, as herd never writes it (nil if nothing is): a partition id
// ValidateID refuses, epoch 0, a member named by a released record, a
// session or a GivenBack mark that is not a NewSessionID id, a held record
// whose member id ValidateID refuses. For a backend whose session ids are
// NewSessionID's.
func CheckOwnership(o Ownership) error {
	if err := ValidateID("partition", o.Partition); err != nil {
		return err
	}
	switch {
	case o.Epoch == 0:
		return errors.New("epoch 0")
	case o.Session == "" && o.Member != "":
		return fmt.Errorf("released record names member %.40q", o.Member)
	case o.Session != "" && !IsSessionID(o.Session):
		return fmt.Errorf("session %.40q is not a session id this store makes", o.Session)
	case o.Session != "" && ValidateID("member", o.Member) != nil:
		return ValidateID("member", o.Member)
	case o.GivenBack != "" && !IsSessionID(o.GivenBack):
		return fmt.Errorf("given-back mark %.40q is not a session id this store makes", o.GivenBack)
	}
	return nil
}
