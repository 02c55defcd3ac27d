package herd

import "context"

// SessionDone is closed when the member's session under which this claim was
// made has ended: fenced because it could not be renewed in time, expired
// in the store, or the member stopped (Join's context cancelled, or the end
// of a Leave). From that moment another member may start the partition as
// soon as the store expires the session, so a handler still finishing
// after a handoff (its Context already cancelled, the partition not yet
// released) must stop at once: a handler that gives some other process a
// grace period after Context is cancelled (herd run, with SIGTERM) cuts it
// short here. context.Cause of SessionCause says why.
//
// Its channel is never closed for a Claim made outside herd (a test of a
// handler).
func (c *Claim) SessionDone() <-chan struct{} {
	if c.sess == nil {
		return nil
	}
	return c.sess.ctx.Done()
}

// SessionCause says why the claim's session ended (ErrFenced,
// ErrSessionExpired, ErrLeft, or the error of Join's context), nil while it
// lives.
func (c *Claim) SessionCause() error {
	if c.sess == nil {
		return nil
	}
	return context.Cause(c.sess.ctx)
}
