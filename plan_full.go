package herd

// A full plan: from the replica's copy of the group, the target assignment,
// then what this member does about it, step by step: the partitions it
// runs (keep, drop, hand off), those the target gives it (claim, or wait),
// and the records of its own it does not run (release).

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/herdhq/herd/balance"
	"github.com/herdhq/herd/internal/loadmeter"
	"github.com/herdhq/herd/store"
)

// fullPlan is what the steps of one full plan share: the copy of the group
// joined with the partition set, and the target assignment.
type fullPlan struct {
	sess     *session
	slots    map[string]*slot
	base     uint64 // the member's writes the copy shows (Member.writes)
	b        *reconcileBuf
	sessions []store.SessionInfo // live sessions, sorted by id
	parts    []store.Partition   // the partition set, sorted by id, placeable ones only
	owners   []store.Ownership   // the records, sorted by partition
	me       int32               // this member's index in b.members
}

// plan computes the target from the replica, drops the partitions this
// member lost and starts handing off those the target gives to others
// (neither waits on the store), and returns what is left to claim and
// release.
func (m *Member) plan(ctx context.Context, sess *session, slots map[string]*slot) (reconcilePlan, error) {
	if pl, ok := m.planOnTarget(sess, slots); ok {
		return pl, nil
	}
	var pl reconcilePlan
	prev := m.planner.target // its lists are reused: nobody else's once the replica's is dropped
	m.rep.dropTarget()
	m.planner.target = nil
	m.planner.plannedAt = time.Now()
	layout := m.rep.layoutNow() // before the copy: see layoutNow
	snap, base, err := m.rep.current()
	defer func() {
		if snap != nil {
			m.planner.planGap = planGap(len(snap.Owners), time.Since(m.planner.plannedAt), m.cfg.SessionTTL/40)
		}
	}()
	defer m.rep.release()
	if pl, ok, err := m.planChecks(ctx, sess, snap, base, err); !ok {
		return pl, err
	}
	m.planner.full.Add(1)

	b := &m.planner.buf
	fp := &fullPlan{sess: sess, slots: slots, base: base, b: b}
	if err := m.assign(fp, snap); err != nil {
		return pl, err
	}
	var recPart []int32 // the feed's hint into snap's records
	if sameSlice(fp.owners, snap.Owners) {
		recPart = b.recPart
	}
	life := m.cfg.RenewInterval
	if prev.same(sess.id, fp.sessions, fp.parts, b.target) {
		life = min(2*prev.life, maxTargetLife*m.cfg.RenewInterval)
	}
	t := newPlanTarget(prev, sess.id, fp.sessions, fp.parts, b.target, recPart, m.cfg.RenewInterval)
	t.life, t.byCount, t.layout = life, b.byCount, layout // its quiet time stays RenewInterval/3
	m.planner.target, m.planner.targetAt = t, snap.Version

	handed := m.rel.hold() // the handoffs' releases are sent together
	defer handed()
	m.planRunning(fp)
	m.planClaims(fp, &pl)
	pl.release = m.planReleases(fp)
	if m.loss.toRestore(snap) {
		// Restores not answered, or a set not put back: no entry will
		// come, so look again as a failed renewal is retried.
		pl.lookAgainIn(m.cfg.retryPause())
		pl.held = true // no target: the next plan is a full one
	}
	return pl, nil
}

// lookAgainIn has the loop plan again within wait at the latest.
func (pl *reconcilePlan) lookAgainIn(wait time.Duration) {
	if pl.next == 0 || wait < pl.next {
		pl.next = wait
	}
}

// assign joins the copy snap with the partition set into fp, and computes
// the target assignment (fp.b.target).
func (m *Member) assign(fp *fullPlan, snap *store.Snapshot) error {
	b, sess := fp.b, fp.sess
	sessions, parts := b.sorted(snap)
	parts, owners := unplaceable(parts, snap.Malformed), snap.Owners
	if b.sessIdx == nil {
		b.sessIdx = map[string]int32{}
	}
	clear(b.sessIdx)
	b.members = b.members[:0]
	for i, s := range sessions {
		b.sessIdx[s.ID] = int32(i)
		b.members = append(b.members, balance.Member{ID: s.ID, Weight: s.Weight})
	}
	me := b.sessIdx[sess.id]

	if !b.join(sessions, parts, owners, sess.id) {
		// The store broke its promise of records sorted by partition.
		owners = sortedOwners(owners)
		b.join(sessions, parts, owners, sess.id)
	}
	fp.sessions, fp.parts, fp.owners, fp.me = sessions, parts, owners, me
	if b.records < m.loss.lastRecords {
		// Records are never deleted: the store lost data (a failover to a
		// replica that missed the last writes may keep our session).
		m.log.Warn("ownership records vanished from the store: it lost data", "records", b.records, "before", m.loss.lastRecords)
		m.holdAfterLoss(true)
	}
	m.loss.lastRecords = b.records
	fp.ownUnshownClaims()
	// By count, unless the loads differ and the balance by load clearly
	// improves on it; a function of the copy alone, as every member must
	// find the same target.
	target, err := b.assigner.AssignSorted(b.members, b.parts, b.owner, b.target)
	var unequal bool
	b.load, unequal = loadmeter.Align(b.load, len(b.parts), func(i int) string { return b.parts[i].ID }, snap.Loads)
	b.byCount = !unequal
	if err == nil && unequal {
		b.byLoad, err = b.assigner.AssignLoad(b.members, b.parts, b.owner, b.load, m.cfg.LoadBalance, b.byLoad)
		imp := balance.Improves(b.members, b.parts, target, b.byLoad, b.load, m.cfg.LoadBalance)
		if err == nil && imp {
			target, b.byLoad = b.byLoad, target
		}
	}
	if err != nil {
		return fmt.Errorf("assign: %w", err) // unreachable: the input is sorted
	}
	b.target = target
	// Partitions given back go to another member while the giver lives.
	if b.marked > 0 { // join found marks: at rest, none (and the pass over the records is saved)
		b.avoid, _ = avoidGivers(b.members, b.parts, owners, b.rec, b.owner, target, b.sessIdx, b.avoid)
	}
	return nil
}

// ownUnshownClaims counts as this member's the claims the replica does
// not show yet, so the target does not move them for want of an entry.
func (fp *fullPlan) ownUnshownClaims() {
	b := fp.b
	for p, sl := range fp.slots {
		if !sl.runsFor(fp.sess) || fp.base >= sl.seq {
			continue
		}
		if i, ok := partIndex(fp.parts, p, &sl.at); ok && b.owner[i] != fp.me {
			if r := b.rec[i]; r < 0 || fp.owners[r].Epoch < sl.c.Epoch {
				b.owner[i] = fp.me
			}
		}
	}
}

// planRunning decides, for each partition this member runs, to keep it,
// drop it (lost) or hand it off (the target gives it to another).
func (m *Member) planRunning(fp *fullPlan) {
	b, sess, owners, target := fp.b, fp.sess, fp.owners, fp.b.target
	for p, sl := range fp.slots {
		if !sl.runsFor(sess) {
			continue
		}
		i, inSet := partIndex(fp.parts, p, &sl.at)
		var rec *store.Ownership
		if inSet {
			if r := b.rec[i]; r >= 0 {
				rec = &owners[r] // b.rec leaves placeholders out
			}
		} else if r, ok := searchRecord(owners, p); ok && owners[r].Epoch > 0 {
			rec = &owners[r]
		}
		if (rec == nil || rec.Epoch < sl.c.Epoch) && fp.base < sl.seq {
			// Our claim's entry is not in the replica yet: the record says
			// nothing of a loss. Hand off all the same if the target says
			// so: the release is fenced by our epoch and logged after it.
			if inSet && target[i] != fp.me {
				m.planner.step.handingOff(p)
				m.handOff(sl)
			}
			continue
		}
		switch {
		case rec == nil || rec.Session != sess.id || rec.Epoch != sl.c.Epoch:
			m.planner.step.dropLost(p)
			if cp := sl.c.restorePoint(); rec == nil && cp != nil {
				// Our record vanished: the store lost it. Put it back.
				m.loss.restores = append(m.loss.restores, store.Ownership{Partition: p, Epoch: sl.c.Epoch, Checkpoint: cp})
				m.holdAfterLoss(true)
			}
			sl.mode.Store(modeLost)
			sl.cancel()
			m.unown(p)
		case !inSet || target[i] != fp.me:
			m.planner.step.handingOff(p)
			// Not over a give-back begun: released either way, keeping its mark.
			m.handOff(sl)
		}
	}
}

// planClaims lists in pl the partitions the target gives this member that
// it may claim now, in ID order, and when to look again at the others.
func (m *Member) planClaims(fp *fullPlan, pl *reconcilePlan) {
	b, me := fp.b, fp.me
	now := time.Now()
	m.planner.incoming = 0
	if now.Before(m.loss.holdFresh) && m.loss.holdFree.Before(m.loss.holdFresh) && slices.Contains(b.rec, -1) {
		// Back from a session loss, the store has partitions without a
		// record: it lost data. Hold every free partition (holdAfterLoss).
		m.loss.holdFree = m.loss.holdFresh
	}
	for i, t := range b.target {
		if t != me {
			continue
		}
		p := fp.parts[i].ID
		if sl := fp.slots[p]; sl != nil {
			sl.claimOnceStopped(fp.sess)
			continue
		}
		if o := b.owner[i]; o >= 0 && o != me {
			// Still held: we claim it once the replica shows the release.
			m.planner.incoming++
			continue
		}
		hold := m.loss.holdFree // every free partition, or else only record-less ones
		if !now.Before(hold) && b.rec[i] < 0 {
			hold = m.loss.holdFresh
		}
		if b.owner[i] < 0 && now.Before(hold) {
			// Its previous owners may be about to restore it (or a newer
			// one over a stale restore): see holdAfterLoss.
			pl.lookAgainIn(hold.Sub(now))
			pl.held = true
			continue
		}
		if wait := m.contestWait(p, now); wait > 0 {
			pl.lookAgainIn(wait)
			continue
		}
		// Free, or a record naming our session that we do not run (a
		// Claim whose reply was lost, a record a failover brought back):
		// Claim gives it a fresh epoch, so we never run the record's old one.
		pl.claim = append(pl.claim, p)
		pl.claimAt = append(pl.claimAt, int32(i))
	}
}

// contestWait is how long to wait before claiming p, free in the copy,
// as a claim of it failed (0: now) and the entry that explains it is on
// its way. Once the feed read the log to its end since, and RenewInterval
// passed, it is not coming (a record written by hand): read the group.
func (m *Member) contestWait(p string, now time.Time) time.Duration {
	at, ok, reached := m.rep.contestedSince(p)
	if !ok {
		return 0
	}
	wait := m.cfg.RenewInterval - now.Sub(at)
	if wait <= 0 && !reached {
		wait = m.cfg.RenewInterval
	}
	if wait > 0 {
		return wait
	}
	m.rep.uncontest(p)
	m.rep.resync()
	return 0
}

// planReleases lists this member's records it does not run and the target
// gives to others, released after the claims.
func (m *Member) planReleases(fp *fullPlan) []store.Ownership {
	b := fp.b
	var release []store.Ownership
	add := func(r *store.Ownership) {
		if fp.slots[r.Partition] == nil && !m.releasedAlready(r.Partition, r.Epoch, true) {
			release = append(release, store.Ownership{Partition: r.Partition, Epoch: r.Epoch})
		}
	}
	for i, o := range b.owner {
		// A partition we run may be ours without a record (ownUnshownClaims).
		if o == fp.me && b.target[i] != fp.me && fp.slots[fp.parts[i].ID] == nil {
			add(&fp.owners[b.rec[i]])
		}
	}
	for _, j := range b.strays {
		add(&fp.owners[j])
	}
	return release
}
