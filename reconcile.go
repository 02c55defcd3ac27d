package herd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/herdhq/herd/store"
)

// reconcile plans from the replica (no store call) and carries the plan
// out: claims and releases in batches. It returns when to look again (0:
// when the replica changes).
func (m *Member) reconcile(sess *session, slots map[string]*slot) (next time.Duration, err error) {
	defer m.logStep()
	tctx, cancel := context.WithTimeout(sess.ctx, m.cfg.SessionTTL)
	defer cancel()
	ctx, fcancel, ok := sess.withFence(tctx)
	defer fcancel()
	if !ok {
		return 0, nil // the session is being fenced; the loop opens a new one
	}
	pl, err := m.plan(ctx, sess, slots)
	if err != nil || pl.wait {
		return pl.next, err
	}
	set := m.planner.target != nil && !pl.held && !pl.onTarget
	if set {
		// Nothing to look at later but contested claims: until an entry
		// says otherwise, or such a claim is due, plans would do nothing
		// (target.go). Set before the claims below, so the others' claims
		// meanwhile are checked too; dropped if ours fail.
		if pl.next > 0 {
			m.planner.target.due = time.Now().Add(pl.next)
		}
		m.rep.setTarget(m.planner.target, m.planner.targetAt)
	}

	if done, err := m.claimAll(ctx, sess, slots, pl.claim, pl.claimAt); done || err != nil {
		m.rep.dropTarget()
		return pl.next, err
	}
	if set {
		m.rep.stretchQuiet(m.planner.target, time.Since(m.planner.plannedAt))
	}

	// Records the store says are ours but we do not run (a Claim whose reply
	// was lost) and the target gives to others: release them.
	var held []store.Ownership
	for _, r := range pl.release {
		if slots[r.Partition] == nil {
			held = append(held, r)
		}
	}
	for len(held) > 0 {
		n := min(len(held), store.MaxBatch)
		if _, err := m.st.ReleaseBatch(ctx, m.cfg.Group, sess.id, held[:n]); err != nil {
			m.rep.dropTarget()
			if errors.Is(err, store.ErrCorrupt) {
				// Broken keys, which the log cannot show: read the group.
				m.rep.distrust()
				return pl.next, nil
			}
			return pl.next, fmt.Errorf("release %d records: %w", n, err)
		}
		// Each is released, not ours or malformed: none is sent again.
		m.noteReleased(held[:n])
		held = held[n:]
	}
	return pl.next, nil
}

// claimAll claims the partitions ps not running here, in batches, and
// starts their handlers; one claimed by another first, or malformed, is
// contested. It reports done if the session turned out expired.
func (m *Member) claimAll(ctx context.Context, sess *session, slots map[string]*slot, ps []string, at []int32) (done bool, err error) {
	ps, at = notRunning(slots, ps, at)
	for len(ps) > 0 {
		batch := ps[:min(len(ps), store.MaxBatch)]
		ps = ps[len(batch):]
		hints := at[:len(batch)]
		at = at[len(batch):]
		res, err := m.st.ClaimBatch(ctx, m.cfg.Group, sess.id, batch)
		switch {
		case errors.Is(err, store.ErrSessionExpired):
			sess.cancel(ErrSessionExpired)
			return true, nil
		case errors.Is(err, store.ErrCorrupt):
			// As in reconcile: read the group.
			m.rep.distrust()
			return true, nil
		case err != nil:
			return false, fmt.Errorf("claim %d partitions: %w", len(batch), err)
		case len(res) != len(batch):
			return false, fmt.Errorf("claim %d partitions: the store answered %d results: %w", len(batch), len(res), store.ErrCorrupt)
		}
		seq := m.writes.Add(1)
		var claimed []string
		for i, r := range res {
			p := batch[i]
			switch {
			case r.Err == nil:
				m.start(sess, slots, r.Ownership, seq, hints[i])
				m.planner.step.claim(p, r.Ownership.Epoch)
			case errors.Is(r.Err, store.ErrClaimed):
				// Another got there first: its entry is on its way, or
				// plan reads the group anew.
				claimed = append(claimed, p)
			case errors.Is(r.Err, store.ErrCorrupt):
				// Its record broke, which the log cannot show: the read
				// lists it as malformed (reported once, not placed).
				m.rep.contest(p, time.Now())
				m.rep.resync()
			default:
				m.rep.contestClaims(claimed, time.Now())
				return false, fmt.Errorf("claim %q: %w", p, r.Err)
			}
		}
		m.rep.contestClaims(claimed, time.Now())
	}
	return false, nil
}

// notRunning returns the partitions of ps that no slot runs, and their
// index hints (at, or -1 each if at is nil), in new lists.
func notRunning(slots map[string]*slot, ps []string, at []int32) ([]string, []int32) {
	keep, hints := make([]string, 0, len(ps)), make([]int32, 0, len(ps))
	for i, p := range ps {
		if slots[p] != nil {
			continue
		}
		h := int32(-1)
		if i < len(at) {
			h = at[i]
		}
		keep, hints = append(keep, p), append(hints, h)
	}
	return keep, hints
}
