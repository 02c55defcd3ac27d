package herd

// Followers yield to receivers: in a process that runs several members of
// one group, a member with nothing to receive reads the group's log after
// those that are still to receive partitions.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// A rebalance's entries are read by every member: decoded, checked
// against the member's aim and applied to its copy, about half a
// microsecond an entry. A member that has nothing to receive (its plan is
// carried out by others' claims) needs none of them to act, only to keep
// its copy up to date for its next plan; the members still to receive need
// them now, to claim what is released toward them. When many members share
// a process (a test; herd bench runs 110 on two cores), the followers'
// reading took the CPU the receivers needed: in herd bench --scenario
// large, a CPU profile of the join showed a third of the process's time
// reading and applying its 18,180 entries, 100 times over, while the 10
// members that joined waited for theirs and for the replies to their
// claims (a claim or release call took up to 0.4 s, most of it waiting to
// be scheduled). Members on machines of their own do not take each
// other's CPU; members sharing one do. So a follower waits to read the log
// while a member of its group in this process is still to receive, and
// catches up after (the join balanced in 1.19-1.57 s instead of
// 1.67-1.73 s, four runs of each). The wait ends at once when:
//   - no member of the group in this process is receiving any more;
//   - a member of the group in this process reads news of the membership
//     or of the partition set (a session opened or ended, a new set),
//     which may change every member's target (those reading see it at
//     once: a receiving member does not wait);
//   - this member's own loop asks for a read (replica.kick), or stops;
//   - the log has been quiet for followIdle: no member of the group in
//     this process read an entry meanwhile (the receivers may be waiting
//     for a partition that only this member's next plan would hand off,
//     and a plan that waits for the log to go quiet: see aim.go);
//   - followWait has passed (a member of another process may have made a
//     change this process did not read).
//
// A member alone in its process never waits: it follows nobody.
//
// The members that share a flow are those of one group that reach the same
// data: the store's Scope if it has one (redisstore's names the server and
// the key prefix, so members on connections of their own share it, as
// herd bench's do), else the store handle itself. A flow lives while a
// member uses it, so members of separate tests never share one (nor the
// channels it makes, which testing/synctest forbids across bubbles).
type flows struct {
	mu sync.Mutex
	m  map[string]*flow
}

var allFlows = flows{m: map[string]*flow{}}

// flow is what the members of one group in this process share.
type flow struct {
	key       string
	users     int          // members using it (flows.mu)
	receivers atomic.Int64 // members receiving (Member.receiving)
	active    atomic.Int64 // when a member last read entries of the log (unix ns)
	mu        sync.Mutex
	news      chan struct{} // closed (and replaced) by notify
}

// flowKey is the key of group's flow for members using st.
func flowKey(st store.Store, group string) string {
	return store.ScopeOf(st) + "\x00" + group
}

// acquire returns the flow of key, made if none, for one more member.
func (fs *flows) acquire(key string) *flow {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := fs.m[key]
	if f == nil {
		f = &flow{key: key, news: make(chan struct{})}
		fs.m[key] = f
	}
	f.users++
	return f
}

// release forgets f for one member; the last one drops it.
func (fs *flows) release(f *flow) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.users--; f.users <= 0 && fs.m[f.key] == f {
		delete(fs.m, f.key)
	}
}

// notify wakes every follower waiting in wait.
func (f *flow) notify() {
	f.mu.Lock()
	close(f.news)
	f.news = make(chan struct{})
	f.mu.Unlock()
}

// changed notes that a member of the group starts (on) or stops receiving.
func (f *flow) changed(on bool) {
	if on {
		f.receivers.Add(1)
		return
	}
	if f.receivers.Add(-1) == 0 {
		f.notify()
	}
}

// read notes that a member of the group read entries of the log.
func (f *flow) read() { f.active.Store(time.Now().UnixNano()) }

// wait blocks while a member of the group is receiving and the log is
// busy (a member of the group read entries within idle), until news, kick
// or done, or for at most d.
func (f *flow) wait(d, idle time.Duration, kick, done <-chan struct{}) {
	if f.receivers.Load() <= 0 {
		return
	}
	end := time.Now().Add(d)
	t := time.NewTimer(d)
	defer t.Stop()
	for f.receivers.Load() > 0 {
		f.mu.Lock()
		news := f.news
		f.mu.Unlock()
		if f.receivers.Load() <= 0 {
			return
		}
		// The log is quiet: the receivers may be waiting for what only
		// this member's plan can see (an aim expires some time after the
		// last entry it let pass: aim.go), so read it now.
		quiet := time.Unix(0, f.active.Load()).Add(idle)
		now := time.Now()
		if !now.Before(quiet) || !now.Before(end) {
			return
		}
		until := quiet
		if end.Before(until) {
			until = end
		}
		t.Reset(until.Sub(now))
		select {
		case <-news:
			if f.receivers.Load() > 0 {
				return // news of the membership: read it now
			}
		case <-kick:
			return
		case <-done:
			return
		case <-t.C:
		}
	}
}

// followIdle is how long the log must be quiet, for a session TTL of ttl,
// for a follower to read it all the same: SessionTTL/40 (250 ms by
// default), the longest a burst of entries delays a plan (planGap).
func followIdle(ttl time.Duration) time.Duration { return ttl / 40 }

// followWait bounds a follower's wait for a session TTL of ttl: a tenth of
// it (1 s by default), as long as a member waits for JoinSettle and a
// round of plans after a change it could not see.
func followWait(ttl time.Duration) time.Duration { return ttl / 10 }

// setReceiving sets m.receiving and keeps its group's count of receiving
// members.
func (m *Member) setReceiving(on bool) {
	if m.receiving.Swap(on) != on {
		m.flow.changed(on)
	}
}
