// Package idindex is an index of ids by position, for the large lists of
// partition ids a member and a store read: an open-addressing table (linear
// probing, at most half full) of positions plus one, 0 marking an empty
// slot. It holds no pointers, so the garbage collector never scans it (a
// map[string]int32 of 100,000 records was 3.7 MB of pointers), and it
// finds a position by a hash and a comparison with the list's own id.
package idindex

import "hash/maphash"

// seed hashes ids for every index of this process.
var seed = maphash.MakeSeed()

// Build returns an index of n ids, id(i) being the i-th.
func Build(n int, id func(i int) string) []int32 {
	size := 1
	for size < 2*n {
		size <<= 1
	}
	slots := make([]int32, size)
	mask := uint64(size - 1)
	for i := range n {
		h := Hash(id(i)) & mask
		for slots[h] != 0 {
			h = (h + 1) & mask
		}
		slots[h] = int32(i + 1)
	}
	return slots
}

// Hash is the hash of id an index places it by: its slot is the first
// free one from Hash(id) & (len(index)-1) on.
func Hash(id string) uint64 { return maphash.String(seed, id) }

// HashBytes is Hash of string(id).
func HashBytes(id []byte) uint64 { return maphash.Bytes(seed, id) }
