package herd

import "time"

// FenceTime is when the member fences itself, cancelling this claim's
// handler and refusing its writes, unless a renewal of its session succeeds
// first: the last successful renewal's send time plus
// SessionTTL-FenceMargin. Every renewal moves it later. It carries a reading
// of the monotonic clock, so time.Now().Before(c.FenceTime()) is immune to
// changes of the wall clock. Past it, another member may own the partition
// as soon as the store expires the session, even if Context is not yet
// cancelled (the cancellation comes from the renewal goroutine, which a
// stopped or starved process runs late): check it before an action that
// must not start after the partition was lost. Once SessionDone is closed
// the claim is fenced, whatever FenceTime says.
//
// Zero for a Claim made outside herd (a test of a handler).
func (c *Claim) FenceTime() time.Time {
	if c.sess == nil {
		return time.Time{}
	}
	if t := c.sess.fence.Load(); t != nil {
		return *t
	}
	return time.Time{}
}
