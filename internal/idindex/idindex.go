// Package idindex is an index of ids by position, for the large lists of
// partition ids a member and a store read: an open-addressing table (linear
// probing, at most half full) of positions plus one, 0 marking an empty
// slot. It holds no pointers, so the garbage collector never scans it (a
// map[string]int32 of 100,000 records was 3.7 MB of pointers), and it
// finds a position by a hash and a comparison with the list's own id.
//
// A slot also holds the top bits of its id's hash (a tag; 14 bits for
// 100,000 ids) above the position: a lookup passes over the slots of
// other ids by their tag, without loading those ids from the list, which
// are scattered over memory. About a quarter of the ids of a table half
// full are not at the first slot tried.
package idindex

import (
	"hash/maphash"
	"math/bits"
)

// seed hashes ids for every index of this process.
var seed = maphash.MakeSeed()

// Index is the index of a list of ids (Build). The zero Index indexes
// nothing: every lookup misses.
type Index struct {
	slots    []int32
	low      int32 // the low bits of a slot: its position plus one
	posBits  uint8 // how many
	tagShift uint8 // a hash shifted right by it is the tag (64: none)
}

// Build returns an index of n ids, id(i) being the i-th.
func Build(n int, id func(i int) string) Index {
	size := 1
	for size < 2*n {
		size <<= 1
	}
	posBits := uint8(bits.Len32(uint32(n)))
	x := Index{slots: make([]int32, size), low: int32(1)<<posBits - 1, posBits: posBits, tagShift: 33 + posBits}
	mask := uint64(size - 1)
	for i := range n {
		h := Hash(id(i))
		s := h & mask
		for x.slots[s] != 0 {
			s = (s + 1) & mask
		}
		x.slots[s] = x.tag(h) | int32(i+1)
	}
	return x
}

// Len is the index's number of slots (0: the zero Index), a power of two
// at least twice the ids'.
func (x Index) Len() int { return len(x.slots) }

// tag is the part of a slot that hash h sets: its top bits (31 - posBits
// of them; tagShift is 64 - that), above the position, so that a slot is
// never negative.
func (x Index) tag(h uint64) int32 { return int32(h>>x.tagShift) << x.posBits }

// Home is the first slot an id of hash h is looked for at.
func (x Index) Home(h uint64) uint64 { return h & uint64(len(x.slots)-1) }

// Next returns the first position, from slot s on, of an id whose hash may
// be h (its tag matches), and its slot; -1 if an empty slot comes first.
// The caller compares the id at the position with its own and, if they
// differ, calls Next again from the slot after (on a full table it would
// go round for ever: Build leaves half the slots empty). The zero Index
// returns -1.
func (x Index) Next(h, s uint64) (pos int, slot uint64) {
	if len(x.slots) == 0 {
		return -1, 0
	}
	mask := uint64(len(x.slots) - 1)
	want := x.tag(h)
	for s &= mask; ; s = (s + 1) & mask {
		v := x.slots[s]
		if v == 0 {
			return -1, s
		}
		if v&^x.low == want {
			return int(v&x.low) - 1, s
		}
	}
}

// After is the slot after s.
func (x Index) After(s uint64) uint64 { return (s + 1) & uint64(len(x.slots)-1) }

// Hash is the hash of id an index places it by.
func Hash(id string) uint64 { return maphash.String(seed, id) }

// HashBytes is Hash of string(id).
func HashBytes(id []byte) uint64 { return maphash.Bytes(seed, id) }
