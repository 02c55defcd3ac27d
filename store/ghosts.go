package store

import (
	"errors"
	"slices"
	"sync"
	"time"
)

// Ghosts remembers the sessions that calls of OpenSession which failed on
// the network or their deadline may have opened: the server ran the call
// and its reply was lost (a cut that began after the request arrived,
// packets dropped on the way back). Such a session is alive and nobody
// renews it: the other members count it until it expires and hand it
// partitions, which sit idle until then (a TTL). The member whose call
// failed tries again, so the next OpenSession of the group closes it
// first, which the log shows at once. A backend over a network opens its
// sessions through a Ghosts of its own (OpenSession: redisstore, pgstore,
// etcdstore); the zero value is ready to use.
//
// A session opened by such a call expires a TTL after the call ran, which
// was before the call failed, provided the backend makes sure that a call
// given up on cannot reach the server later (redisstore and pgstore reset
// the connection of a failed call, so the kernel does not send its request
// again after a heal; etcdstore revokes a failed open's lease). Ghosts
// forgets it after twice the TTL, for requests queued in the network when
// the reset was sent. At most maxGhosts are kept per group (a caller
// retrying an open with a long TTL throughout a long outage), the oldest
// dropped first.
type Ghosts struct {
	mu  sync.Mutex
	ids map[string][]ghost // by group
}

type ghost struct {
	id    string
	until time.Time // when it has surely expired
}

const maxGhosts = 100

// OpenSession opens a session of group for a backend's OpenSession. It
// first closes, with closeGhost, the sessions of group that earlier calls
// which failed may have opened (if one fails, it returns that error and
// keeps the rest for the next call). It then calls open with new ids as
// OpenWithNewID does (op names the call in errors: "pgstore:
// OpenSession"). If open fails with an error wrapping ErrUnavailable, the
// session may have been opened all the same: its id is kept for the next
// call. closeGhost must close a session whatever member opened it, and
// succeed when there is no such session (closed or expired already).
func (g *Ghosts) OpenSession(group string, ttl time.Duration, op string,
	closeGhost func(id string) error, open func(id string) (status string, err error)) (string, error) {
	ids := g.take(group)
	for i, x := range ids {
		if err := closeGhost(x.id); err != nil {
			g.put(group, ids[i:])
			return "", err
		}
	}
	tried := ""
	id, err := OpenWithNewID(op, func(id string) (string, error) {
		tried = id
		return open(id)
	})
	if err != nil && tried != "" && errors.Is(err, ErrUnavailable) {
		g.put(group, []ghost{{id: tried, until: time.Now().Add(2 * ttl)}})
	}
	return id, err
}

// put adds ids to group's.
func (g *Ghosts) put(group string, ids []ghost) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ids == nil {
		g.ids = map[string][]ghost{}
	}
	l := append(g.ids[group], ids...)
	if len(l) > maxGhosts {
		l = slices.Clone(l[len(l)-maxGhosts:])
	}
	g.ids[group] = l
}

// take removes group's ids and returns those that may still be alive.
func (g *Ghosts) take(group string) []ghost {
	g.mu.Lock()
	l := g.ids[group]
	delete(g.ids, group)
	g.mu.Unlock()
	now := time.Now()
	return slices.DeleteFunc(l, func(x ghost) bool { return now.After(x.until) })
}
