package herd

// Load reports: each member measures its partitions (internal/loadmeter)
// and publishes those that changed in one write per LoadReportInterval;
// every replica learns them from the log, and plan balances by them.

import (
	"time"

	"github.com/herdhq/herd/store"
)

// loadGather is how long the log reader waits after a read of load reports
// only: members report together (reportLoop), so the fleet's reports cost
// about two reads and one plan per member and interval, not one each.
const loadGather = time.Second

// reportLoop publishes the measured loads of session s every
// LoadReportInterval, at multiples of it on the host's clock (so members
// with agreeing clocks report together), until the session ends.
func (m *Member) reportLoop(s *session) {
	iv := m.cfg.LoadReportInterval
	for {
		now := time.Now()
		t := time.NewTimer(now.Truncate(iv).Add(iv).Sub(now))
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if err := m.cfg.gate.Wait(s.ctx); err != nil {
			return
		}
		loads := m.meter.Sample(time.Now(), store.MaxLoads)
		if len(loads) == 0 {
			continue
		}
		ctx, cancel, ok := s.withFence(s.ctx)
		if !ok {
			return // past the fence: the session is ending
		}
		err := m.st.ReportLoads(ctx, m.cfg.Group, s.id, loads)
		cancel()
		if err != nil {
			m.meter.Unpublish(loads) // published at the next interval
			if s.ctx.Err() == nil {
				m.log.Warn("could not publish the partitions' loads; trying again at the next interval", "loads", len(loads), "err", err)
			}
		}
	}
}

// loadOf is the published load of p in the copy, queued entries included.
func (r *replica) loadOf(p string) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.pending) - 1; i >= 0 && r.loadsQueued; i-- {
		cs := r.pending[i]
		for j := len(cs) - 1; j >= 0; j-- {
			if c := &cs[j]; c.Kind == store.LoadsReported {
				if l, ok := (&store.Snapshot{Loads: c.Loads}).LoadOf(p); ok {
					return l, true
				}
			}
		}
	}
	if r.work == nil {
		return 0, false
	}
	return r.work.LoadOf(p)
}

// ReportLoad sets the load of the claim's partition, in place of the rate
// of its Mark and Checkpoint calls: a handler whose items differ in cost
// reports what it knows (CPU or bytes per second...), in one unit across
// the group. The latest value is sampled every LoadReportInterval and
// smoothed (1.5 times above or below replaces the load, else it moves 5 %
// of the way), and published if it changed by over 10 %. A value not a
// finite number >= 0 is ignored. Safe for concurrent use; a no-op on a
// Claim made outside herd.
func (c *Claim) ReportLoad(v float64) { c.load.Report(v) }

// startMeasure begins measuring a claim's partition from its published load.
func (m *Member) startMeasure(c *Claim) {
	if m.meter == nil {
		return
	}
	l, ok := m.rep.loadOf(c.Partition)
	m.meter.Start(c.Partition, c.load, time.Now(), l, ok)
}

// stopMeasure ends it once the handler returned for good, keeping the
// measure if the session ended or until a handoff's release is answered:
// only this member knows the load if the store loses its data meanwhile.
func (m *Member) stopMeasure(c *Claim, handing bool) {
	switch {
	case m.meter == nil:
	case handing || (c.sess != nil && c.sess.ctx.Err() != nil):
		m.meter.StopKeep(c.Partition, c.load)
	default:
		m.meter.Stop(c.Partition, c.load)
	}
}

// releasedMeasure forgets the measure kept for a handoff once released,
// unless the session ended meanwhile.
func (m *Member) releasedMeasure(c *Claim) {
	if m.meter != nil && c.sess != nil && c.sess.ctx.Err() == nil {
		m.meter.Forget(c.Partition)
	}
}
