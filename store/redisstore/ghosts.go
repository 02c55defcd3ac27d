package redisstore

import (
	"slices"
	"sync"
	"time"
)

// ghosts are the sessions that calls of OpenSession which failed on the
// network or their deadline may have opened: the server ran the call and
// its reply was lost (a cut that began after the request arrived, packets
// dropped on the way back). Such a session is alive, and nobody renews
// it: the other members count it until it expires, and hand it
// partitions, which sit idle until then (a TTL, with every partition it
// was given). The member that failed to open it tries again, so the next
// OpenSession of the group closes it first, which the log shows at once.
//
// A session opened by such a call expires a TTL after it was run, which
// was before the call failed (the connection is reset as the call fails,
// so its request cannot arrive later: resetOnClose); ghosts forget it
// after twice that, for requests queued in the network when the reset was
// sent. At most maxGhosts are kept per group (a caller retrying an open
// with a long TTL throughout a long outage), the oldest dropped first.
type ghosts struct {
	mu  sync.Mutex
	ids map[string][]ghost // by group
}

type ghost struct {
	id    string
	until time.Time // when it has surely expired
}

const maxGhosts = 100

// add notes that session id of group may have been opened with ttl.
func (g *ghosts) add(group, id string, ttl time.Duration) {
	g.put(group, []ghost{{id: id, until: time.Now().Add(2 * ttl)}})
}

// put adds ids to group's.
func (g *ghosts) put(group string, ids []ghost) {
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
func (g *ghosts) take(group string) []ghost {
	g.mu.Lock()
	l := g.ids[group]
	delete(g.ids, group)
	g.mu.Unlock()
	now := time.Now()
	return slices.DeleteFunc(l, func(x ghost) bool { return now.After(x.until) })
}
