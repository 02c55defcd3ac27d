// Package stagger dials a connection by attempts started side by side: a
// dial made during a network cut sends a SYN that is lost, and the kernel
// sends it again only a second or more later, so one attempt would hold
// the connection back that long after the heal. pgstore and etcdstore dial
// their connections through it.
package stagger

import (
	"context"
	"net"
	"time"
)

// Dial calls attempt, then again every `every` while none has connected
// and fewer than max are under way, until one connects (the others are
// cancelled, and a connection they make is closed), every attempt has
// failed, which ctx ending makes them do (the last attempt's error).
// started is how many attempts were made. Each attempt runs under a
// context that Dial cancels when it returns, so none outlives it by more
// than its own return: attempt must return when its context ends.
func Dial(ctx context.Context, every time.Duration, max int, attempt func(context.Context) (net.Conn, error)) (c net.Conn, started int, err error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		c   net.Conn
		err error
	}
	results := make(chan result)
	returned := make(chan struct{})
	defer close(returned)
	pending := 0
	start := func() {
		pending++
		started++
		go func() {
			c, err := attempt(actx)
			select {
			case results <- result{c, err}:
			case <-returned: // another attempt connected first
				if c != nil {
					_ = c.Close()
				}
			}
		}()
	}
	start()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last error
	for {
		select {
		case r := <-results:
			pending--
			if r.err == nil {
				return r.c, started, nil
			}
			last = r.err
			if pending == 0 {
				return nil, started, last
			}
		case <-tick.C:
			if pending < max && ctx.Err() == nil {
				start()
			}
		}
	}
}
