package store

import "time"

// Record is one partition's ownership record as Records returns it, for
// views (herd status, job blackboards); the run loop never reads it.
type Record struct {
	Ownership // Checkpoint included (nil if none was ever written)
	// Since is how long ago, on the store's clock, the record got its
	// current epoch (by Claim, ClaimBatch or Restore). 0 if unknown (a
	// record written by an older version).
	Since time.Duration
	// CheckpointAge is how long ago, on the store's clock, the checkpoint
	// was last written (Checkpoint, or Restore with a value); 0 if the
	// record has no checkpoint or the time is unknown.
	CheckpointAge time.Duration
}
