package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// Limits of the flags the commands share. Each command checks all its flags
// in one place (its options' validate method) before doing anything.
const (
	minTTL = 10 * time.Millisecond // herd.Config.Validate's floor
	maxTTL = time.Hour
)

// checkInt reports whether v is in lo..hi, with a message naming the flag
// and what is allowed.
func checkInt(flag string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("--%s must be between %s and %s (got %s)", flag, commas(lo), commas(hi), commas(v))
	}
	return nil
}

// checkDuration reports whether v is in lo..hi.
func checkDuration(flag string, v, lo, hi time.Duration) error {
	if v < lo || v > hi {
		return fmt.Errorf("--%s must be between %v and %v (got %v)", flag, lo, hi, v)
	}
	return nil
}

// checkTTL checks a session TTL flag: the range herd accepts, in whole
// milliseconds (what the stores count in).
func checkTTL(v time.Duration) error {
	if err := checkDuration("ttl", v, minTTL, maxTTL); err != nil {
		return err
	}
	if v%time.Millisecond != 0 {
		return fmt.Errorf("--ttl must be a whole number of milliseconds (got %v)", v)
	}
	return nil
}

// commas formats n with thousands separators: 10,000,000.
func commas(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// addPartitionCount adds --partition-count N, the number of partitions of
// demo and bench, and --partitions as its deprecated spelling: everywhere
// else --partitions (and HERD_PARTITIONS, which the old spelling does not
// read) is a set of partition ids, as in herd run.
func addPartitionCount(cmd *cobra.Command, p *int, def int, usage string) {
	f := cmd.Flags()
	f.IntVar(p, "partition-count", def, usage)
	f.IntVar(p, "partitions", def, usage)
	_ = f.MarkDeprecated("partitions", "use --partition-count (elsewhere --partitions is a set of partition ids)")
}

// partitionCountChanged reports whether --partition-count (or its old
// spelling) was given.
func partitionCountChanged(cmd *cobra.Command) bool {
	return cmd.Flags().Changed("partition-count") || cmd.Flags().Changed("partitions")
}
