package loadmeter

import (
	"github.com/herdhq/herd/store"
)

// Align sets dst[i] to the published load of ids(i) for n partitions
// sorted by id, from loads (sorted by partition, as Snapshot.Loads), and
// reports whether any two differ. A partition with no published load
// counts as the mean of those that have one (a new partition is neither
// hot nor cold until measured). With no load published at all, or all
// equal, equal is true and the balance is by count.
func Align(dst []float64, n int, id func(int) string, loads []store.Load) (load []float64, unequal bool) {
	if cap(dst) < n {
		dst = make([]float64, n)
	}
	dst = dst[:n]
	if len(loads) == 0 || n == 0 {
		return dst, false
	}
	known := make([]bool, n)
	var sum float64
	k, j := 0, 0
	for i := range n {
		p := id(i)
		for j < len(loads) && loads[j].Partition < p {
			j++
		}
		if j < len(loads) && loads[j].Partition == p {
			dst[i], known[i] = loads[j].Load, true
			sum += dst[i]
			k++
		}
	}
	if k == 0 {
		return dst, false
	}
	mean := sum / float64(k)
	for i := range n {
		if !known[i] {
			dst[i] = mean
		}
		if dst[i] != dst[0] {
			unequal = true
		}
	}
	return dst, unequal
}
