package herd

import (
	"strconv"

	"github.com/herdhq/herd/store"
)

// Partition is one unit of work in a group: an id and a weight. The weight
// is stored but not used yet: partitions are balanced by count, each
// counting as one (a member's Config.Weight, its capacity, is used).
type Partition = store.Partition

// Numbered returns partitions "0" .. "n-1", each of weight 1.
func Numbered(n int) []Partition {
	ps := make([]Partition, n)
	for i := range ps {
		ps[i] = Partition{ID: strconv.Itoa(i), Weight: 1}
	}
	return ps
}
