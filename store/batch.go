package store

// Listing groups, the batches of claims and their results, and the next epoch.

import (
	"context"
	"time"
)

// GroupLister lists the groups a store holds. It is not part of Store,
// since members never need it; views that show a whole store (herd status
// without a group, herd groups) use it when the backend offers it, which
// every backend should. Find it with a type assertion:
//
//	if gl, ok := st.(store.GroupLister); ok { groups, err := gl.Groups(ctx) }
type GroupLister interface {
	// Groups returns the ids of the groups of which the store holds
	// anything (a session, a partition set, an ownership record or a log),
	// sorted, each once. A group deleted with DeleteGroup is not listed.
	// Groups changes nothing; it is not one consistent read (a group created
	// or deleted meanwhile may or may not be listed). Keys or rows that are
	// not a group this backend could have written are skipped.
	Groups(ctx context.Context) ([]string, error)
}

// Limits on ids, checked by ValidateID.
const (
	MaxIDLength         = 512
	MaxCheckpointLength = 1 << 20
	// MaxBatch bounds the partitions of one ClaimBatch, ReleaseBatch or
	// Records, so that one batch bounds the time the store spends on it (on
	// Redis, one script blocks the server while it runs: about a
	// millisecond per hundred claims).
	MaxBatch = 1000
)

// ClaimResult is one partition's result in ClaimBatch.
type ClaimResult struct {
	Ownership Ownership // the new record, with its checkpoint, when Err is nil
	Err       error     // nil, or wraps ErrClaimed or ErrCorrupt
}

// NextEpoch is the epoch rule every backend uses: strictly above the previous
// epoch and at least the store's current time in microseconds, so that an
// epoch is never repeated even after the store lost the previous value (as
// long as the store's clock does not go backwards by more than the time
// between the loss and the last claim).
func NextEpoch(prev uint64, storeNow time.Time) uint64 {
	now := uint64(storeNow.UnixMicro())
	if prev+1 > now {
		return prev + 1
	}
	return now
}
