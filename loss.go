package herd

// After a lost session: holding free partitions while their previous owners
// restore what the store may have lost, and restoring this member's own.

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
)

// lossState is what the reconcile loop keeps about lost sessions and the
// store's lost data: checkpoints to put back after a session loss, and
// until when partitions without a live owner are left alone (see
// holdAfterLoss).
type lossState struct {
	restores    []store.Ownership
	holdFresh   time.Time         // until then, record-less partitions are left alone
	holdFree    time.Time         // until then, every partition without a live owner too
	holdPending bool              // a session was lost: hold once the next one opens
	lossSeen    bool              // since then, the store showed it lost data
	logMark     *store.Version    // where the log must go on from for no hold (see keptData); nil: hold
	lastRecords int               // ownership records in the last snapshot
	lastParts   []store.Partition // the last partition set the store held (possibly emptied)
}

// holdAfterLoss makes the member leave partitions alone for SessionTTL,
// because the store may just have lost its data and their previous owners
// may be about to restore their records: record-less partitions, and if
// all (the store showed that it lost data), every partition without a live
// owner.
//
// It is called when a new session opens after one was lost: whether the
// store forgot the session or this member could not reach the store and
// fenced itself, the store may have lost data meanwhile. all is set if the
// store forgot the session, or one of this member's restores wrote
// something; plan also holds every free partition if it finds a
// record-less one during the hold, and when records vanish from a snapshot
// (records are never deleted otherwise).
//
// Why SessionTTL (or RenewInterval+2*RenewTimeout if longer): a member cut
// off from the store tries again at least every RenewInterval/4 (500 ms at
// most), each attempt restoring first (bounded by RenewTimeout) and then
// opening a session (bounded by RenewTimeout), so every member whose
// connection comes back when the first one's does has restored before the
// first one claims anything. A member that comes back later may find its partitions taken
// (doc.go says what is lost then). Why every
// free partition after a loss, not only record-less ones: a member that
// lost a partition long ago may restore its stale checkpoint first, and
// the newer owner's Restore (with a higher epoch) replaces it only while
// nobody has claimed it (see store.Store.Restore). Only record-less ones
// when there is no sign of a loss, so that a member back from a mere
// outage takes its share of handed-off partitions at once.
func (m *Member) holdAfterLoss(all bool) {
	until := time.Now().Add(max(m.cfg.SessionTTL, m.cfg.RenewInterval+2*m.cfg.RenewTimeout))
	if until.After(m.loss.holdFresh) {
		m.loss.holdFresh = until
	}
	if all && until.After(m.loss.holdFree) {
		m.loss.holdFree = until
	}
}

// noteLossMark records, as sess is lost, the point of the log from which
// the next session checks that the store kept its data (keptData): the
// copy's version, unless the log has said since sess opened that it could
// not be continued (a new history: the store may have lost data), or the
// copy has none.
func (m *Member) noteLossMark(sess *session) {
	v, goneAt := m.rep.mark()
	m.loss.logMark = nil
	if v != (store.Version{}) && goneAt.Before(sess.opened) {
		m.loss.logMark = &v
	}
}

// keptData reports whether the store has kept its data since the session
// lost last: the group's log still goes on from m.loss.logMark. It is called
// once the next session is open, so a loss of data before that call shows
// (and one after it ends that session too). A store that loses data, or
// its latest writes, begins a new history of the log (store.Version), so
// the log going on from a point this member reached before the loss shows
// that nothing was lost since: no member has a record to put back, and
// holding would only leave partitions idle (issue 28, item 9).
//
// Why not hold and be skipped by the others instead: while a member holds
// it is counted by every member's plan, which gives it its share, and the
// partitions handed to it run nowhere until the hold ends (up to
// SessionTTL after the faults are over). The others cannot tell that it
// holds without a new field in the session record (a change of the
// Store contract), and a member that does not open its session until its
// hold is over delays its return after every lost session by SessionTTL.
// A hold that is needed (the store lost data, or this cannot be told) is
// shared: every member whose session the loss ended holds too, so nothing
// is handed to the holders that anyone would run. What is left: a log
// trimmed past the mark (ErrVersionGone without a loss) holds as before.
func (m *Member) keptData(ctx context.Context) bool {
	if m.loss.logMark == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RenewTimeout)
	defer cancel()
	// Returns at once: the session just opened logged an entry after
	// the mark.
	_, _, err := m.st.Changes(ctx, m.cfg.Group, *m.loss.logMark, 1)
	return err == nil
}

// restore puts back the last checkpoint this member wrote for each
// partition of a lost session, where the store has no record any more or
// only a released one with a lower epoch. Restore writes nothing over an
// owned record or one with an epoch as high, so this is harmless when the
// store kept its data, and keeps checkpoints from going backwards when it
// did not: of all the members that held a partition, the last one (the
// highest epoch) wins.
//
// The whole pass is bounded by one RenewTimeout, and stops at the first
// call the store does not answer: during an outage it costs one timeout,
// not one per partition. What is left is tried again before the next
// session is opened, or at the next read. The partition set is put back
// too if the store holds none, whether or not any checkpoint is pending (a
// member whose handlers never checkpointed still knows the set). A pending
// restore is kept until
// the store answers it, however long that takes: it can never beat a newer
// owner's (see above). It reports whether it wrote anything, which shows
// that the store had lost data.
func (m *Member) restore(ctx context.Context) (wrote bool) {
	if len(m.loss.restores) == 0 && len(m.loss.lastParts) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RenewTimeout)
	defer cancel()
	if len(m.loss.lastParts) > 0 {
		// A store that lost its data lost the partition set too.
		snap, err := m.st.Snapshot(ctx, m.cfg.Group)
		// Only a set the store does not hold at all was lost; an empty
		// one was emptied on purpose and stays so.
		if err == nil && len(snap.Partitions) == 0 && !snap.PartitionSetStored {
			set := store.PartitionSet{Kind: m.cfg.Kind, Partitions: m.loss.lastParts, Mode: store.SetIfAbsent}
			if res, err := m.st.SetPartitions(ctx, m.cfg.Group, set); err == nil && res.Written {
				m.log.Info("restored the partition set the store had lost", "partitions", len(m.loss.lastParts))
				wrote = true
			}
		}
	}
	// Several lost sessions may have held one partition: keep the last.
	slices.SortStableFunc(m.loss.restores, func(a, b store.Ownership) int {
		if c := strings.Compare(a.Partition, b.Partition); c != 0 {
			return c
		}
		return cmp.Compare(b.Epoch, a.Epoch)
	})
	m.loss.restores = slices.CompactFunc(m.loss.restores, func(a, b store.Ownership) bool { return a.Partition == b.Partition })
	keep := m.loss.restores[:0]
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
		default:
			// Store unreachable, or the pass is out of time: keep this one
			// and the rest for the next pass.
			m.loss.restores = append(keep, m.loss.restores[i:]...)
			return wrote
		}
	}
	m.loss.restores = keep
	return wrote
}
