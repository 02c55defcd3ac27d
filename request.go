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

// takeRequests acts on the requests among the entries call c read, at no
// store call of their own: one to leave naming this member starts a
// graceful leave, even between sessions; each goes to Config.onRequest.
func (f *feed) takeRequests(c *logCall) {
	if c.err != nil || c.cancelled || !c.kinds.has(store.Requested) {
		return
	}
	m := f.m
	for _, e := range c.cs {
		if e.Kind != store.Requested {
			continue
		}
		r := e.Request()
		if r.Action == store.RequestLeave && r.Member == m.cfg.Member {
			m.startLeave(true)
		}
		if m.cfg.onRequest != nil {
			m.cfg.onRequest(r)
		}
	}
}

// startLeave starts a graceful leave unless the member is leaving already;
// requested (through the group's log) makes Err say ErrLeaveRequested.
func (m *Member) startLeave(requested bool) {
	m.life.leaveOnce.Do(func() {
		if requested {
			m.log.Info("leave requested through the group's log: leaving gracefully")
			m.life.leaveRequested = true
		}
		close(m.life.leaveCh)
		m.life.stopAttempt()
	})
}
