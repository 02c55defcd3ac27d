package store

import (
	"context"
	"fmt"
)

// Claim claims one partition for session: ClaimBatch of that partition
// alone, with the same result and errors as one entry of a batch
// (ErrClaimed, ErrCorrupt) or the whole call (ErrSessionExpired,
// ErrUnavailable, ErrInvalid). Members claim in batches; Claim is for tools
// and tests, so that no backend writes a single claim of its own.
func Claim(ctx context.Context, st Store, group, partition, session string) (Ownership, error) {
	if st == nil {
		return Ownership{}, errNilStore("claim", partition)
	}
	rs, err := st.ClaimBatch(ctx, group, session, []string{partition})
	if err != nil {
		return Ownership{}, err
	}
	if len(rs) != 1 {
		return Ownership{}, fmt.Errorf("claim of %q: the store returned %d results for one partition (a backend that breaks the contract)", partition, len(rs))
	}
	return rs[0].Ownership, rs[0].Err
}

// Release gives one partition up: ReleaseBatch of that record alone, with
// the same errors as one entry of a batch (ErrNotOwner, ErrCorrupt) or the
// whole call (ErrUnavailable, ErrInvalid). Like Claim, for tools and tests.
func Release(ctx context.Context, st Store, group, partition, session string, epoch uint64) error {
	if st == nil {
		return errNilStore("release", partition)
	}
	errs, err := st.ReleaseBatch(ctx, group, session, []Ownership{{Partition: partition, Epoch: epoch}})
	if err != nil {
		return err
	}
	if len(errs) != 1 {
		return fmt.Errorf("release of %q: the store returned %d results for one record (a backend that breaks the contract)", partition, len(errs))
	}
	return errs[0]
}

// errNilStore is the error of Claim and Release given no store.
func errNilStore(op, partition string) error {
	return fmt.Errorf("%s of %q: no store given (nil): %w", op, partition, ErrInvalid)
}
