package herd

import (
	"fmt"

	"github.com/herdhq/herd/store"
)

// ErrLeaveRequested: the member left the group gracefully because a request
// to leave naming it was logged in the group (store.RequestLeave, sent by
// the dashboard's "leave" action). Err returns it instead of ErrLeft after
// such a leave, and errors.Is(err, ErrLeft) holds for it too.
var ErrLeaveRequested = fmt.Errorf("herd: leave requested through the group's log: %w", ErrLeft)

// takeRequests acts on the requests among the entries call c read (see
// store.Request): a request to leave that names this member starts a
// graceful leave, as Leave does; every request goes to the handler the jobs
// scheduler set, if any. The entries come from the log the member follows
// anyway, so requests cost no store operation of their own. A request read
// while the member is between sessions is acted on all the same: it was
// logged, and the member is the one it names.
func (f *feed) takeRequests(c *logCall) {
	if c.err != nil || c.cancelled {
		return
	}
	m := f.m
	for _, e := range c.cs {
		if e.Kind != store.Requested {
			continue
		}
		r := e.Request()
		if r.Action == store.RequestLeave && r.Member == m.cfg.Member {
			m.leaveOnRequest()
		}
		if m.cfg.onRequest != nil {
			m.cfg.onRequest(r)
		}
	}
}

// leaveOnRequest starts a graceful leave, as Leave does without waiting,
// unless the member is leaving already; Err then says ErrLeaveRequested.
func (m *Member) leaveOnRequest() {
	m.life.leaveOnce.Do(func() {
		m.log.Info("leave requested through the group's log: leaving gracefully")
		m.life.leaveRequested.Store(true)
		close(m.life.leaveCh)
		m.life.stopAttempt()
	})
}
