package herd

import (
	"context"
	"errors"
	"time"

	"github.com/herdhq/herd/balance"
	"github.com/herdhq/herd/store"
)

// ErrGiveBack, returned by a Handler (wrapped or not), gives the partition
// back instead of having the handler started again: the member writes the
// last Mark, then releases the partition marked as given back by its
// session (Ownership.GivenBack, shown by herd status). While that session
// lives, the partition goes to another live member if there is one, else
// back to this one (the mark cleared). A handler that fails the same way on
// one member (a missing file, a bad disk) returns it when it sees fit; herd
// run does after --max-failures.
var ErrGiveBack = errors.New("herd: partition given back")

// avoidGivers places a partition given back by a live session on another
// member if one lives (balance.Avoid), the same on every member. rec[i]
// indexes parts[i]'s record in owners (-1: none); buf is scratch, returned.
func avoidGivers(members []balance.Member, parts []balance.Partition, owners []store.Ownership,
	rec, owner, target []int32, sessIdx map[string]int32, buf []int32) (_ []int32, moved int) {
	if len(members) < 2 {
		return buf, 0
	}
	avoid := buf[:0]
	for i, r := range rec {
		if r < 0 || int(r) >= len(owners) || owners[r].GivenBack == "" {
			continue
		}
		g, alive := sessIdx[owners[r].GivenBack]
		if !alive {
			continue // the giver's session has ended: the mark is moot
		}
		if len(avoid) == 0 {
			avoid = resize(avoid, len(rec))
			for j := range avoid {
				avoid[j] = -1
			}
		}
		avoid[i] = g
	}
	if len(avoid) == 0 {
		return avoid, 0
	}
	return avoid, balance.Avoid(members, parts, owner, avoid, target)
}

// giveBack switches sl, whose handler returned ErrGiveBack, to giving back
// unless it is lost.
func (m *Member) giveBack(sl *slot, err error) bool {
	if !sl.mode.CompareAndSwap(modeRun, modeGiveBack) && !sl.mode.CompareAndSwap(modeHandoff, modeGiveBack) {
		return false
	}
	c := &sl.c
	m.log.Warn("handler gave the partition back; another member will run it if there is one", "partition", c.Partition, "epoch", c.Epoch, "err", err)
	sl.cancel() // the claim's context: the handler has returned, anything it started stops
	m.unown(c.Partition)
	return true
}

// sendGiveBack gives sl's partition back, on its goroutine, after the last
// Mark was written; contested first, so plan does not claim it again
// (clearing the mark) before the replica shows the release.
func (m *Member) sendGiveBack(sl *slot) {
	if m.cfg.gate.Wait(m.runCtx) != nil {
		return
	}
	c := &sl.c
	m.rep.contest(c.Partition, time.Now())
	ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.RenewTimeout)
	defer cancel()
	err := m.st.GiveBack(ctx, m.cfg.Group, c.Partition, sl.sess.id, c.Epoch)
	switch {
	case err == nil || errors.Is(err, store.ErrNotOwner): // ErrNotOwner: lost meanwhile
		m.noteReleased([]store.Ownership{{Partition: c.Partition, Epoch: c.Epoch}})
		if err == nil {
			return
		}
	case errors.Is(err, store.ErrCorrupt):
		m.log.Debug("giving the partition back failed", "partition", c.Partition, "err", err)
		m.rep.distrust()
	default:
		// The record stays ours and no entry will say so: plan in full.
		m.log.Warn("giving the partition back failed; the partition stays with this member", "partition", c.Partition, "err", err)
		sl.planInFull.Store(true)
	}
	m.rep.uncontest(c.Partition)
}
