package herd

// The plan's frame: what plan decided, plan on the target, the checks
// before a full plan (plan_full.go), and the timings that space plans.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// plannerState is what plan keeps from one plan to the next; the
// reconcile loop owns it.
type plannerState struct {
	buf       reconcileBuf    // plan's working memory
	sessions  map[string]bool // live sessions at the last reconcile
	joinedAt  time.Time       // when a new session was last seen
	joinGap   time.Duration   // the longest wait between two sessions' news in that session's burst (replica.joinGap)
	endedAt   time.Time       // when plan first saw a session end that no plan has counted yet (zero: none)
	expireDue time.Time       // when the group's earliest session expires unless renewed (zero: unknown)

	step      stepLog       // what the current rebalance step changed, for its log line
	full      atomic.Int64  // full plans made (past planChecks); tests read it while the member runs
	incoming  int           // partitions the last plan gave this member that others still hold
	plannedAt time.Time     // when plan last began a full plan
	planGap   time.Duration // the least time until it runs in full again (see planGap)

	target   *planTarget   // the last full plan's, made the replica's by reconcile before its claims (target.go)
	targetAt store.Version // the version of the copy target was computed on
}

// reconcilePlan is what plan decided: the store calls left to make.
type reconcilePlan struct {
	next     time.Duration // when to look again (JoinSettle, a hold, a contested claim)
	held     bool          // next is for a hold (not only contested claims)
	wait     bool          // nothing to do: the replica does not show the session yet, or the store no longer knows it
	onTarget bool          // no full plan: claim is what was released toward this member (target.go)
	claim    []string      // partitions to claim, in ID order
	claimAt  []int32       // per partition of claim, its index in the full plan's set (slot.at); nil on the target
	release  []store.Ownership
}

// planOnTarget is plan when every entry since the last full plan carried it
// out (target.go): claim what was released toward this member since. It
// reports false if a full plan is due: the target is off or expired,
// restores are pending, or a hold after a loss (holdAfterLoss) is under way
// and there is something to claim.
func (m *Member) planOnTarget(sess *session, slots map[string]*slot) (pl reconcilePlan, ok bool) {
	now := time.Now()
	next, claims, ok := m.rep.onTargetRunning(sess, slots, now, maxTargetLife*m.cfg.RenewInterval)
	if !ok || len(m.loss.restores) > 0 {
		return pl, false
	}
	claims = slices.DeleteFunc(claims, func(p string) bool {
		sl := slots[p]
		if sl != nil {
			sl.claimOnceStopped(sess)
		}
		return sl != nil
	})
	pl.next, pl.wait = next, true
	if len(claims) == 0 {
		return pl, true
	}
	if m.loss.holding(now) {
		return pl, false
	}
	slices.Sort(claims)
	pl.claim, pl.wait, pl.onTarget = slices.Compact(claims), false, true
	m.planner.incoming = max(0, m.planner.incoming-len(pl.claim))
	return pl, true
}

// canPlanOnTarget reports whether plan would plan on the target now
// (planOnTarget), taking nothing.
func (m *Member) canPlanOnTarget(sess *session) bool {
	now := time.Now()
	return len(m.loss.restores) == 0 && !m.loss.holding(now) && m.rep.onTargetNow(sess.id, now)
}

// planChecks is what plan checks on the copy snap (replica.current's)
// before it plans in full: ok false, with what to return, if the copy is
// not ready, this session ended, or the membership is to settle first.
func (m *Member) planChecks(ctx context.Context, sess *session, snap *store.Snapshot, base uint64, err error) (pl reconcilePlan, ok bool, _ error) {
	if err != nil {
		return pl, false, fmt.Errorf("read group: %w", err)
	}
	if snap == nil || base < sess.seq || !m.rep.isFresh() {
		pl.wait = true // the feed wakes the loop when the copy shows this session
		return pl, false, nil
	}
	m.corruptRepaired()
	m.reportMalformed(snap.Malformed)
	if len(snap.Partitions) > 0 || snap.PartitionSetStored {
		m.loss.lastParts = snap.Partitions // follows a set emptied on purpose
	}
	if m.loss.toRestore(snap) && m.restore(ctx) { // restores that failed before this session, or a lost set
		m.holdAfterLoss(true)
		m.restoreLoads(ctx, sess, true, false) // those kept as the session opened
	}
	// The copy shows this session's opening (base >= sess.seq): if it lacks
	// it, the store forgot it. A linear scan: Alive trusts the sort order.
	if !slices.ContainsFunc(snap.Sessions, func(s store.SessionInfo) bool { return s.ID == sess.id }) {
		sess.cancel(ErrSessionExpired)
		pl.wait = true // for the loop to open a new session
		return pl, false, nil
	}
	m.noteSessions(snap)
	if wait := m.joinWait(sess.opened, snap); wait > 0 {
		pl.next = wait // others may be joining too: the fleet moves once
		return pl, false, nil
	}
	if !m.planner.endedAt.IsZero() {
		if wait := m.expirySettle(time.Now()); wait > 0 {
			pl.next = wait
			return pl, false, nil
		}
		m.planner.endedAt = time.Time{}
	}
	return pl, true, nil
}

// noteSessions compares snap's live sessions with the last plan's: one new
// moves joinedAt, one gone sets endedAt if no plan counted an end yet.
func (m *Member) noteSessions(snap *store.Snapshot) {
	if m.planner.sessions == nil {
		m.planner.sessions = map[string]bool{}
	}
	// JoinSettle counts from when the feed brought the last session, not
	// from when plan saw it: a late plan would wait again, and hand back
	// late what it claimed on a partial view.
	present, joined := 0, 0
	for _, s := range snap.Sessions {
		if !m.planner.sessions[s.ID] {
			joined++
		} else {
			present++
		}
	}
	if joined > 0 {
		m.planner.joinedAt, _ = m.rep.sessionNews()
		m.planner.joinGap = m.rep.lastJoinGap()
	}
	if present < len(m.planner.sessions) && m.planner.endedAt.IsZero() {
		m.planner.endedAt = time.Now()
	}
	clear(m.planner.sessions)
	for _, s := range snap.Sessions {
		m.planner.sessions[s.ID] = true
	}
}

// expirySettle is how long plan waits, after sessions ended (endedAt),
// for the next one due to expire (expireDue) and this member's call to
// expire it; 0: not at all. Members that crash together expire over up to
// RenewInterval, and each expiry's plan costs every member O(P). The
// expiry's entry ends the wait; at most SessionTTL/10, or RenewInterval
// for a session that missed a renewal (missedRenewal): those of a crash
// are all planned for at once (TestCrashesPlannedTogether: 1 full plan
// per member for 10 crashes over 3 s, 4 waiting SessionTTL/10 at most).
func (m *Member) expirySettle(now time.Time) time.Duration {
	due, ttl := m.planner.expireDue, m.cfg.SessionTTL
	if due.IsZero() {
		return 0
	}
	settle := expireDelay(ttl) + max(m.cfg.JoinSettle, 10*time.Millisecond)
	var wait time.Duration
	switch {
	case due.After(now):
		wait = due.Sub(now) + settle
	case now.Before(due.Add(settle)):
		// Due, and this member's call to expire it about to be made.
		wait = due.Add(settle).Sub(now)
	default:
		return 0
	}
	limit := ttl / 10
	if m.missedRenewal(due.Sub(now)) {
		limit = max(limit, m.cfg.RenewInterval+settle)
	}
	if now.Add(wait).Sub(m.planner.endedAt) > limit {
		return 0
	}
	return wait
}

// missedRenewal reports whether a session due to expire in left has
// missed a renewal: a live member renews every RenewInterval, each
// attempt given up after RenewTimeout, so its session has at least
// SessionTTL - RenewInterval - RenewTimeout left. One with less belongs to
// a member that crashed (or is late beyond its timeout: waiting for it
// costs only the time until its renewal moves expireDue on).
func (m *Member) missedRenewal(left time.Duration) bool {
	return left < m.cfg.SessionTTL-m.cfg.RenewInterval-m.cfg.RenewTimeout
}

// expireDelay is how long after a session is due the loop asks the store
// to expire it: enough for timer slack, never spinning; a crash's takeover
// waits for it in full.
func expireDelay(ttl time.Duration) time.Duration {
	return max(ttl/1000, 5*time.Millisecond)
}

// planGap is the least time between two full plans of p records, the last
// having taken took: the larger of 1 µs per record and 4 x took keeps
// planning to about a fifth of a core, and limit (SessionTTL/40) bounds
// how late a burst is acted on.
func planGap(p int, took, limit time.Duration) time.Duration {
	return min(max(time.Duration(p)*time.Microsecond, 4*took), limit)
}

// joinWait is how long plan is to wait for the membership to settle after
// the last session opened: JoinSettle, the quiet period joinQuiet gives
// for joins one after the other, and before a first placement the one
// startQuiet gives for startSpan and startGap.
func (m *Member) joinWait(opened time.Time, snap *store.Snapshot) time.Duration {
	settle, at := m.cfg.JoinSettle, m.planner.joinedAt
	wait := time.Until(at.Add(settle))
	if wait > 0 || settle <= 0 {
		return wait
	}
	// nothingRuns scans the records: only within the longest quiet period
	// (limit, as startQuiet's and joinQuiet's are within it).
	limit := m.cfg.SessionTTL / 10
	if time.Until(at.Add(max(settle, limit))) <= 0 {
		return 0
	}
	if !nothingRuns(snap) {
		return max(0, time.Until(at.Add(joinQuiet(settle, limit, m.planner.joinGap))))
	}
	_, newsGap := m.rep.sessionNews()
	span, gap := startSpan(snap, opened, at), startGap(snap, newsGap)
	return max(0, time.Until(at.Add(startQuiet(settle, limit, span, gap))))
}

// startSpan is how long the fleet's start has lasted as far as a member
// whose session opened at opened, with news of one at last, knows: the
// spread of the sessions' Remaining in its read (one reading of the store's
// clock), plus the time to last over which the log brought others.
// Unbounded for a member alone in the group.
func startSpan(snap *store.Snapshot, opened, last time.Time) time.Duration {
	if len(snap.Sessions) < 2 {
		return time.Duration(math.MaxInt64)
	}
	var least, most, logged time.Duration
	for _, s := range snap.Sessions {
		if s.Remaining <= 0 {
			logged = max(0, last.Sub(opened))
			continue
		}
		if least == 0 || s.Remaining < least {
			least = s.Remaining
		}
		most = max(most, s.Remaining)
	}
	return most - least + logged
}

// startGap is the longest pause between two sessions opening in the
// fleet's start: between those of its read (by Remaining, on the store's
// clock), and between two news the feed brought (newsGap, on this member's
// clock: a late read makes a pause look longer, never shorter).
func startGap(snap *store.Snapshot, newsGap time.Duration) time.Duration {
	var rem []time.Duration
	for _, s := range snap.Sessions {
		if s.Remaining > 0 { // those the log brought have none
			rem = append(rem, s.Remaining)
		}
	}
	slices.Sort(rem)
	gap := newsGap
	for i := 1; i < len(rem); i++ {
		gap = max(gap, rem[i]-rem[i-1])
	}
	return gap
}

// startQuiet is how long the membership is to be quiet after the last
// session opened before a first placement: settle for sessions opened
// together, growing with the span of the start to firstSettle x settle,
// and to firstSettle x the longest pause (gap); within [settle, limit].
func startQuiet(settle, limit, span, gap time.Duration) time.Duration {
	most := max(settle, min(firstSettle*settle, limit))
	span = min(max(span, 0), settle)
	byGap := min(firstSettle*max(gap, 0), limit)
	return max(settle, min(most, settle+(firstSettle-1)*span), byGap)
}

// joinQuiet is how long the membership of a placed group is to be quiet
// after the last session opened: settle for a lone join (gap 0); for
// joins one after the other, gap being the longest pause between two of
// them (each within limit of the one before), firstSettle x gap, within
// [settle, limit]. Processes started together on busy hosts open their
// sessions over seconds, and each full plan costs every member a pass
// over the partitions and hands off toward a membership about to change
// again (TestSpreadJoinsPlannedTogether: 10 joins 300 ms apart into 100
// members on 4,000 partitions cost each member 10 full plans and 375
// moves, 2 and 363 with this).
func joinQuiet(settle, limit, gap time.Duration) time.Duration {
	if gap <= 0 {
		return settle
	}
	return max(settle, min(firstSettle*gap, limit))
}

// nothingRuns reports whether no record of snap is held by a live session:
// the group is yet to be placed.
func nothingRuns(snap *store.Snapshot) bool {
	for i := range snap.Owners {
		if s := snap.Owners[i].Session; s != "" && snap.Alive(s) {
			return false
		}
	}
	return true
}

// firstSettle is how many times JoinSettle, or the longest pause between
// two openings, the membership is to be quiet before a first placement
// after a spread-out start: a member that plans while others still join
// claims what they get, and hands it off again. 100 members started on two
// cores open their sessions over about 2 s with pauses up to a second
// (docs/benchmarks.md); TestJoinBurstPlacesOnce replays it: 8,099 moves on
// 4,000 partitions waiting JoinSettle, none with this. Not more: the wait
// delays a first placement.
const firstSettle = 3
