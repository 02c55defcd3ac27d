package main

import (
	"strconv"

	"github.com/herdhq/herd/store"
)

// loadReadCost is what a batch of log entries read (store.Store.Changes)
// costs in load reports: whether the batch held load reports only (a read
// the reports woke), how many load reports it held, and their size as
// redisstore writes them in its stream, `L\n<session>(\n<partition>\n<load>)+`
// (the entry's payload, without the stream's and the protocol's framing),
// and the loads they carry.
func loadReadCost(cs []store.Change) (onlyLoads bool, entries, bytes, loads int64) {
	onlyLoads = len(cs) > 0
	for _, c := range cs {
		if c.Kind != store.LoadsReported {
			onlyLoads = false
			continue
		}
		entries++
		loads += int64(len(c.Loads))
		bytes += int64(2 + len(c.Session))
		for _, l := range c.Loads {
			bytes += int64(2 + len(l.Partition) + len(strconv.FormatFloat(l.Load, 'g', -1, 64)))
		}
	}
	return onlyLoads, entries, bytes, loads
}
