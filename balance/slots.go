package balance

// Sorting and selecting slots, with a tie-break.

import (
	"cmp"
	"slices"
)

// sortSlots sorts s by pos, then by tie (which is called only for equal
// positions), using buf as scratch; it returns the scratch for reuse. The
// order is that of slices.SortFunc with the same comparison: large inputs
// are sorted by a stable LSD radix sort on pos, then each run of equal
// positions by tie.
func sortSlots(s, buf []slot, tie func(a, b slot) int) []slot {
	if len(s) < 256 {
		slices.SortFunc(s, func(a, b slot) int {
			if c := cmp.Compare(a.pos, b.pos); c != 0 {
				return c
			}
			return tie(a, b)
		})
		return buf
	}
	const bits = 11
	const buckets = 1 << bits
	buf = resize(buf, len(s))
	src, dst := s, buf
	var count [buckets]int
	for shift := uint(0); shift < 64; shift += bits {
		clear(count[:])
		for i := range src {
			count[(src[i].pos>>shift)&(buckets-1)]++
		}
		if count[(src[0].pos>>shift)&(buckets-1)] == len(src) {
			continue // every key has this digit: the pass would not move anything
		}
		sum := 0
		for b, c := range count {
			count[b] = sum
			sum += c
		}
		for i := range src {
			d := (src[i].pos >> shift) & (buckets - 1)
			dst[count[d]] = src[i]
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &s[0] {
		copy(s, src)
	}
	for i := 0; i < len(s); {
		j := i + 1
		for j < len(s) && s[j].pos == s[i].pos {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(s[i:j], tie)
		}
		i = j
	}
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

// resize returns s with length n, reallocated only if its capacity is short.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
