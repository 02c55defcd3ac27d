package herd

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
)

// lossState is what the reconcile loop keeps after a lost session: what to
// put back, and until when to leave ownerless partitions alone
// (docs/safety.md, "When the store loses its data").
type lossState struct {
	restores    []store.Ownership
	loads       map[string]float64 // lost sessions' partitions' loads, to publish again (restoreLoads); made by Join
	holdFresh   time.Time          // until then, record-less partitions are left alone
	holdFree    time.Time          // until then, every partition without a live owner too
	lossSeen    bool               // since the session was lost, the store showed it lost data
	logMark     *store.Version     // where the log must go on from for no hold (see readFromMark); nil: hold
	lastRecords int                // ownership records in the last snapshot
	lastParts   []store.Partition  // the last partition set the store held (possibly emptied)
}

// holding reports whether a hold after a lost session is on at now.
func (l *lossState) holding(now time.Time) bool {
	return now.Before(l.holdFree) || now.Before(l.holdFresh)
}

// toRestore reports whether restores are pending, or snap shows the
// partition set lost (none stored, after one was).
func (l *lossState) toRestore(snap *store.Snapshot) bool {
	return len(l.restores) > 0 || (!snap.PartitionSetStored && len(snap.Partitions) == 0 && len(l.lastParts) > 0)
}

// holdAfterLoss leaves record-less partitions alone, and with all (a sign
// the store lost data) every one without a live owner, for
// max(SessionTTL, RenewInterval+2*RenewTimeout): the previous owners restore
// first, as a restore never replaces a claimed record.
func (m *Member) holdAfterLoss(all bool) {
	until := time.Now().Add(max(m.cfg.SessionTTL, m.cfg.RenewInterval+2*m.cfg.RenewTimeout))
	if until.After(m.loss.holdFresh) {
		m.loss.holdFresh = until
	}
	if all && until.After(m.loss.holdFree) {
		m.loss.holdFree = until
	}
}

// noteLossMark keeps, as sess is lost, the copy's version for readFromMark;
// none if the log began a new history since sess opened.
func (m *Member) noteLossMark(sess *session) {
	v, goneAt := m.rep.mark()
	m.loss.logMark = nil
	if v != (store.Version{}) && goneAt.Before(sess.opened) {
		m.loss.logMark = &v
	}
}

// readFromMark reads one log entry after the loss mark, bounded by d: nil
// means the store kept its data (one that loses it begins a new history).
func (m *Member) readFromMark(ctx context.Context, d time.Duration) error {
	if m.loss.logMark == nil {
		return store.ErrVersionGone
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, _, err := m.st.Changes(ctx, m.cfg.Group, *m.loss.logMark, 1)
	return err
}

// restore puts back the last checkpoint this member wrote for each
// partition of a lost session, and the partition set if the store holds
// none, within RenewTimeout; what fails is tried again later. Store.Restore
// never writes over a newer record: harmless if the store kept its data,
// else the highest epoch wins. Having written anything means a loss.
func (m *Member) restore(ctx context.Context) (wrote bool) {
	if len(m.loss.restores) == 0 && len(m.loss.lastParts) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RenewTimeout)
	defer cancel()
	// The group is read (30 to 600 ms of Redis on 100,000 records) only if
	// the log answers within RenewTimeout/8 that it does not go on: a read
	// would keep a slow store slow.
	if len(m.loss.lastParts) > 0 && errors.Is(m.readFromMark(ctx, m.cfg.RenewTimeout/8), store.ErrVersionGone) {
		snap, err := m.st.Snapshot(ctx, m.cfg.Group)
		if err == nil && len(snap.Partitions) == 0 && !snap.PartitionSetStored { // an emptied set stays empty
			set := store.PartitionSet{Kind: m.cfg.Kind, Partitions: m.loss.lastParts, Mode: store.SetIfAbsent}
			if res, err := m.st.SetPartitions(ctx, m.cfg.Group, set); err == nil && res.Written {
				m.log.Info("restored the partition set the store had lost", "partitions", len(m.loss.lastParts))
				wrote = true
			}
		}
	}
	// Several lost sessions may have held one partition: keep the last.
	slices.SortStableFunc(m.loss.restores, func(a, b store.Ownership) int {
		return cmp.Or(strings.Compare(a.Partition, b.Partition), cmp.Compare(b.Epoch, a.Epoch))
	})
	m.loss.restores = slices.CompactFunc(m.loss.restores, func(a, b store.Ownership) bool { return a.Partition == b.Partition })
	for i, r := range m.loss.restores {
		err := ctx.Err()
		if err == nil {
			err = m.st.Restore(ctx, m.cfg.Group, r.Partition, r.Epoch, r.Checkpoint)
		}
		switch {
		case err == nil:
			m.log.Info("restored a checkpoint the store had lost", "partition", r.Partition, "epoch", r.Epoch)
			wrote = true
		case errors.Is(err, store.ErrNotOwner), errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrCorrupt):
			// A newer record is there, or this one can never be written.
		default: // unreachable or out of time: the rest for the next pass
			m.loss.restores = m.loss.restores[i:]
			return wrote
		}
	}
	m.loss.restores = m.loss.restores[:0]
	return wrote
}

// noteLostLoad keeps the load of partition p of a lost session (measured,
// else published), for restoreLoads.
func (m *Member) noteLostLoad(p string) {
	if m.meter == nil {
		return
	}
	v, ok := m.meter.Measure(p)
	if !ok {
		v, ok = m.rep.loadOf(p)
	}
	if ok {
		m.loss.loads[p] = v
	}
}

// noteLostLoads begins the loads to publish again as a session opened at
// opened is lost: the copy's lostLoads, and freeLoads if the log went gone
// meanwhile (the copy may be read after the loss). A session that ran
// nothing, lost during the hold, keeps those kept before.
func (m *Member) noteLostLoads(ran bool, opened time.Time) {
	if m.meter == nil {
		return
	}
	if ran || time.Now().After(m.loss.holdFresh) {
		clear(m.loss.loads)
	}
	r := &m.rep
	r.mu.Lock()
	defer r.mu.Unlock()
	keep := r.lostLoads(m.cfg.Member)
	if !r.goneAt.Before(opened) {
		keep = append(r.freeLoads, keep...)
	}
	r.freeLoads = nil
	for _, l := range keep {
		m.loss.loads[l.Partition] = l.Load
	}
}

// lostLoads returns the copy's loads member publishes again if the store
// lost its data: of partitions no live session holds, and of its own records
// (handed off ones too, which its meter forgot). r.mu is held.
func (r *replica) lostLoads(member string) []store.Load {
	if r.work == nil {
		return nil
	}
	var lost []store.Load
	for _, l := range r.work.Loads {
		i, ok := searchRecord(r.work.Owners, l.Partition)
		if !ok || r.work.Owners[i].Member == member || !r.heldByLive(l.Partition) {
			lost = append(lost, l)
		}
	}
	return lost
}

// restoreLoads publishes again, on s, the lost sessions' loads if the store
// lost its data, so the fleet places by load after the hold; within
// RenewTimeout, not retried (the next owners measure anyway). With maybe
// (restores not answered yet) they are kept for plan: only this member may
// know them.
func (m *Member) restoreLoads(ctx context.Context, s *session, lost, maybe bool) {
	if m.meter != nil {
		m.meter.DropKept()
	}
	if !lost && !maybe {
		clear(m.loss.loads)
	}
	if !lost || len(m.loss.loads) == 0 {
		return
	}
	loads := make([]store.Load, 0, len(m.loss.loads))
	for p, v := range m.loss.loads {
		loads = append(loads, store.Load{Partition: p, Load: v})
	}
	store.SortLoads(loads)
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RenewTimeout)
	defer cancel()
	for i := 0; i < len(loads); i += store.MaxLoads {
		if err := m.st.ReportLoads(ctx, m.cfg.Group, s.id, loads[i:min(i+store.MaxLoads, len(loads))]); err != nil {
			m.log.Warn("could not publish again the loads the store lost; the partitions' next owners will measure them", "loads", len(loads)-i, "err", err)
			return
		}
	}
	m.log.Info("published again the loads the store had lost", "loads", len(loads))
}
