package main

import (
	"fmt"
	"time"
)

// maxPartitions bounds --partitions of demo and bench, which run every
// member in this one process. Each running partition costs its handler's
// goroutine (2 KiB of stack, 4 KiB once grown by a release, and a second,
// short-lived goroutine while it is handed off) and the members' state for
// it: contexts, the claim, snapshot and balance buffers. Measured peak RSS of bench --scenario scale-out on the
// in-process store is about 15 KiB per partition (docs/cli.md, "demo and bench: memory"), so this
// keeps a run under 2 GiB.
const maxPartitions = 125_000

// checkPartitions checks --partitions, saying why the limit exists.
func checkPartitions(v int) error {
	if err := checkInt("partition-count", v, 1, maxPartitions); err != nil {
		if v > maxPartitions {
			return fmt.Errorf("%w: demo and bench run every member in this one process, "+
				"at about 15 KiB of memory per partition (a handler goroutine each, and the members' state), "+
				"so %s partitions would need about %s", err, commas(v), approxBytes(v*15<<10))
		}
		return err
	}
	return nil
}

// approxBytes formats n bytes as MiB or GiB, one decimal.
func approxBytes(n int) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// balanceAllowance is the time a fleet in this process may take, on top of
// the fixed timeouts, to balance p partitions: every claim and release is a
// store call, and a member starts one handler per partition.
func balanceAllowance(p int) time.Duration {
	return time.Duration(p) * 50 * time.Microsecond
}
