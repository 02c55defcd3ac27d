package balance

// Sorting and selecting slots, with a tie-break.

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
)

// sortSlots sorts s by pos, then by tie (which is called only for equal
// positions), using buf as scratch; it returns the scratch for reuse. The
// order is that of slices.SortFunc with the same comparison. Positions are
// hashes, spread evenly over the ring: large inputs are dealt into about
// one bucket per slot by the top bits of pos, and each bucket is sorted on
// its own (by insertion, or by slices.SortFunc if it is long, as inputs
// chosen to collide make it). The slots are moved twice; an LSD radix sort
// of 11-bit digits moved them twice per digit, six times over, and sorting
// was half of what computing a 100,000-partition ideal cost each member
// process of a fleet (balance.idealOf: about 25 ms of CPU per member, 16
// member processes on two cores).
func sortSlots(s, buf []slot, tie func(a, b slot) int) []slot {
	less := func(a, b slot) int {
		if c := cmp.Compare(a.pos, b.pos); c != 0 {
			return c
		}
		return tie(a, b)
	}
	if len(s) < 256 {
		slices.SortFunc(s, less)
		return buf
	}
	width := bits.Len(uint(len(s))) - 1 // len(s)/2 < 2^width <= len(s)
	shift := 64 - uint(width)
	buf = resize(buf, len(s))
	end := make([]int32, 1<<width) // end[d]: where bucket d ends in buf (once dealt)
	for i := range s {
		end[s[i].pos>>shift]++
	}
	sum := int32(0)
	for d, c := range end {
		end[d] = sum // where bucket d starts, until dealt
		sum += c
	}
	for i := range s {
		d := s[i].pos >> shift
		buf[end[d]] = s[i]
		end[d]++
	}
	start := int32(0)
	for _, e := range end {
		b := buf[start:e]
		switch {
		case len(b) > 24:
			slices.SortFunc(b, less)
		case len(b) > 1:
			for i := 1; i < len(b); i++ {
				for j := i; j > 0 && less(b[j-1], b[j]) > 0; j-- {
					b[j-1], b[j] = b[j], b[j-1]
				}
			}
		}
		start = e
	}
	copy(s, buf)
	return buf
}

// selectSlots reorders s so that s[:k] holds its k least slots, by pos and
// then by tie (called only for equal positions), in no particular order:
// the same slots as sorting s would put there. It is a quickselect with a
// three-way partition around the median of three, O(len(s)) on the hash
// positions it is given.
func selectSlots(s []slot, k int, tie func(a, b slot) int) {
	c := func(a, b slot) int {
		if d := cmp.Compare(a.pos, b.pos); d != 0 {
			return d
		}
		return tie(a, b)
	}
	lo, hi := 0, len(s)
	for hi-lo > 1 && lo < k && k < hi {
		a, b, d := s[lo], s[lo+(hi-lo)/2], s[hi-1]
		if c(a, b) > 0 {
			a, b = b, a
		}
		if c(b, d) > 0 {
			b = d
			if c(a, b) > 0 {
				b = a
			}
		}
		pivot := b // the median of a, b, d
		// s[lo:lt] < pivot, s[lt:i] == pivot, s[gt:hi] > pivot.
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch x := c(s[i], pivot); {
			case x < 0:
				s[lt], s[i] = s[i], s[lt]
				lt++
				i++
			case x > 0:
				gt--
				s[i], s[gt] = s[gt], s[i]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k > gt:
			lo = gt
		default:
			return // s[:k] is s[:lt] and some slots equal to the pivot
		}
	}
}

// selectHashes is selectSlots for positions that are hashes, spread evenly
// over [0, 2^64): the k least of n lie around k/n of the range. One pass
// sets apart the slots below lo (all among the k least, if at most k are)
// and from hi up (none of them, if at least n-k are), with lo and hi three
// standard deviations of the k-th least's rank either side; only those in
// between are selected among, by selectSlots. If the bounds miss (inputs
// chosen to collide), it selects among them all. The slots taken are
// selectSlots' (TestSelectHashesPicksTheLeast). Ranking the partitions of
// members over quota (10 members joining 100 on 100,000 partitions: 100
// selections of 909 of 1,000) by selectSlots alone was a sixth of that
// plan, and is a fifteenth this way (BenchmarkFullPlan/joined10, in a CPU
// profile).
func selectHashes(s []slot, k int, tie func(a, b slot) int) {
	n := len(s)
	if n < 64 || k <= 0 || k >= n {
		selectSlots(s, k, tie)
		return
	}
	d := 3*math.Sqrt(float64(k)*float64(n-k)/float64(n)) + 1
	lo, hi := rangeAt((float64(k)-d)/float64(n)), rangeAt((float64(k)+d)/float64(n))
	// s[:a] < lo, s[a:i] in [lo, hi), s[b:] >= hi (hi 0: none are).
	a, i, b := 0, 0, n
	for i < b {
		switch x := s[i].pos; {
		case x < lo:
			s[a], s[i] = s[i], s[a]
			a++
			i++
		case hi != 0 && x >= hi:
			b--
			s[i], s[b] = s[b], s[i]
		default:
			i++
		}
	}
	if a <= k && k <= b {
		selectSlots(s[a:b], k-a, tie)
		return
	}
	selectSlots(s, k, tie)
}

// rangeAt returns the hash at fraction f of [0, 2^64): 0 for f <= 0, and
// 0 (read as the end) for f >= 1.
func rangeAt(f float64) uint64 {
	if f <= 0 || f >= 1 {
		return 0
	}
	return uint64(f * (1 << 64))
}

// resize returns s with length n, reallocated only if its capacity is short.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
