package main

// One partition's status, the records read for it, and the order of ids.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/herdhq/herd/store"
)

// partitionOf is partition id's status from the snapshot, owned counted
// in its member's entry.
func partitionOf(id string, inSet bool, owners map[string]store.Ownership, badRecord map[string]string,
	snap *store.Snapshot, members map[string]*memberStatus) partitionStatus {
	p := partitionStatus{Partition: id, InSet: inSet}
	if l, ok := snap.LoadOf(id); ok {
		p.Load = &l
	}
	noMember := ""
	if len(snap.Sessions) == 0 {
		noMember = "no live member; "
	}
	if reason, bad := badRecord[id]; bad {
		p.State = stateMalformed
		p.Reason = "malformed ownership record (" + reason + "): no member claims it until it is repaired or deleted"
		return p
	}
	o, ok := owners[id]
	if !ok {
		p.State = stateUnowned
		p.Reason = noMember + "never claimed: waiting for a claim"
		if !inSet {
			p.Reason = "not in the partition set"
		}
		return p
	}
	p.Epoch = &o.Epoch
	if o.GivenBack != "" && snap.Alive(o.GivenBack) {
		// A mark naming a session that has ended is moot: not shown.
		if m := members[o.GivenBack]; m != nil {
			p.GivenBackBy, p.GivenBackSess = ptr(m.Member), ptr(o.GivenBack)
		}
	}
	switch {
	case o.Session == "":
		p.State = stateReleased
		p.Reason = noMember + "released: waiting for a claim"
	case snap.Alive(o.Session):
		p.State = stateRunning
		p.Member, p.Session = &o.Member, &o.Session
		if m := members[o.Session]; m != nil && inSet {
			m.Owned++
			if m.Load != nil && p.Load != nil {
				*m.Load += *p.Load
			}
		}
	default:
		p.State = stateUnowned
		p.Member, p.Session = &o.Member, &o.Session
		p.Reason = noMember + "owner's session is gone (expired or closed): waiting for a claim"
	}
	if !inSet {
		p.Reason = "not in the partition set: its record (and checkpoint) is kept until it returns"
		if p.State == stateRunning {
			p.Reason = "not in the partition set: its owner stops it"
		}
	}
	return p
}

// addRecords fills the checkpoint sizes and ages of ps from Records, in
// batches of store.MaxBatch. A record whose epoch changed since the
// snapshot keeps unknown times: the listing shows one moment.
func addRecords(ctx context.Context, st store.Store, group string, ps []partitionStatus) error {
	var ids []string
	var idx []int
	for i, p := range ps {
		if p.Epoch != nil {
			ids = append(ids, p.Partition)
			idx = append(idx, i)
		}
	}
	for start := 0; start < len(ids); start += store.MaxBatch {
		end := min(start+store.MaxBatch, len(ids))
		rs, err := st.Records(ctx, group, ids[start:end])
		if err != nil {
			return fmt.Errorf("reading checkpoints: %w", err)
		}
		byID := make(map[string]store.Record, len(rs))
		for _, r := range rs {
			byID[r.Partition] = r
		}
		for k := start; k < end; k++ {
			p := &ps[idx[k]]
			r, ok := byID[p.Partition]
			if !ok || r.Epoch != *p.Epoch {
				continue
			}
			if r.Since > 0 {
				p.SinceMS = ptr(r.Since.Milliseconds())
			}
			if r.Checkpoint != nil {
				p.CheckpointBytes = ptr(len(r.Checkpoint))
				if r.CheckpointAge > 0 {
					p.CheckpointAgeMS = ptr(r.CheckpointAge.Milliseconds())
				}
			}
		}
	}
	return nil
}

// sortPartitions sorts by id, decimal ids first in numeric order.
func sortPartitions(ps []partitionStatus) {
	slices.SortFunc(ps, func(a, b partitionStatus) int { return compareIDs(a.Partition, b.Partition) })
}

// compareIDs orders ids for people: decimal numbers first, by value, then
// the others in byte order.
func compareIDs(a, b string) int {
	na, errA := strconv.ParseUint(a, 10, 64)
	nb, errB := strconv.ParseUint(b, 10, 64)
	switch {
	case errA == nil && errB == nil && na != nb:
		if na < nb {
			return -1
		}
		return 1
	case errA == nil && errB != nil:
		return -1
	case errA != nil && errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

func ptr[T any](v T) *T { return &v }

func ptrVal[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
