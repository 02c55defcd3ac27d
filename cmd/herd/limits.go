package main

import "time"

// maxPartitions bounds --partitions of demo and bench, which run every
// member in this one process: each running partition costs a handler
// goroutine and the member's state for it. See the README for the peak
// memory measured at this size.
const maxPartitions = 1_000_000

// balanceAllowance is the time a fleet in this process may take, on top of
// the fixed timeouts, to balance p partitions: every claim and release is a
// store call, and a member starts one handler per partition.
func balanceAllowance(p int) time.Duration {
	return time.Duration(p) * 50 * time.Microsecond
}
