package etcdstore

import "time"

// A connection is of no use until gRPC's handshake on it is done: the
// client sends its preface (and TLS's first flight on etcds://), and gRPC
// waits for the server's first frame, up to the dial timeout (5 s),
// before any call goes on it. A connection dialled while the path loses
// packets may connect (its SYN got through, sent again once or more, so
// the kernel starts it with a retransmission timeout of 3 s) and then
// lose those first bytes: the kernel sends them again 3 s later, and
// every call waits for it, the member's open of its session after a heal
// included (measured: calls failing with no connection for 3 s after a
// heal, a member settled 3.9 s after it with a TTL of 2 s). So until a
// connection has read its first bytes, it is dropped as soon as the
// kernel has held some of what it sent unacknowledged for dialStagger
// (on a working path the server's kernel acknowledges in a round trip,
// whatever the load of the server's process), or when it has read
// nothing for silentMax (the answer is what was lost); gRPC then dials
// again, after its back-off (at most redialMax). Nothing else is under way
// on a connection during its handshake: dropping it fails no call.

// handshakeCheck is how often a connection is checked until it has read
// its first bytes.
const handshakeCheck = 50 * time.Millisecond

// watchHandshake drops c if its handshake is lost (see above); it returns
// once c has read something or is closed, or done is closed (conns.stop).
func (cs *conns) watchHandshake(c *conn, done <-chan struct{}) {
	t := time.NewTicker(handshakeCheck)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if c.closed.Load() || c.read.Load() > c.connected {
			return
		}
		silent := time.Duration(sinceEpoch() - c.connected)
		if lost := unackedFor(c.Conn, dialStagger); lost || silent >= silentMax {
			logConn("dropping a connection whose handshake got no answer", c.Conn, "silent", silent, "lost", lost)
			c.reset()
			return
		}
	}
}
