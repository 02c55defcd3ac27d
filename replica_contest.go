package herd

// Claims the store refused although the replica showed the partition free
// (contested): plan waits for the entry that explains them, or reads anew.

import "time"

// contest marks p contested from now: plan leaves it alone until an entry
// about it arrives (a give-back under way).
func (r *replica) contest(p string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.contestLocked(p, now)
}

func (r *replica) contestLocked(p string, now time.Time) {
	if r.contested == nil {
		r.contested = map[string]time.Time{}
	}
	r.contested[p] = now
	if now.After(r.lastContest) {
		r.lastContest = now
	}
}

// contestClaims contests the partitions ps whose claims failed
// (ErrClaimed) although plan's copy showed them free, but for those the
// feed explained since (a queued entry, or held by a live session).
func (r *replica) contestClaims(ps []string, now time.Time) {
	if len(ps) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	left := make(map[string]bool, len(ps))
	for _, p := range ps {
		left[p] = true
	}
	for _, cs := range r.pending {
		for _, c := range cs {
			delete(left, c.Partition)
		}
	}
	for _, p := range ps {
		if left[p] && !r.heldByLive(p) {
			r.contestLocked(p, now)
		}
	}
}

// heldByLive reports whether the copy shows p held by a live session.
// r.mu is held.
func (r *replica) heldByLive(p string) bool {
	if r.work == nil {
		return false
	}
	i, ok := searchRecord(r.work.Owners, p)
	return ok && r.work.Owners[i].Session != "" && r.work.Alive(r.work.Owners[i].Session)
}

// contestedSince returns when a claim of p failed (at), if nothing new
// about p came since (ok), and whether the feed has read the log to its end
// in a call that began at at or later (reached).
func (r *replica) contestedSince(p string) (at time.Time, ok, reached bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok = r.contested[p]
	return at, ok, !r.reached.Before(at)
}

// uncontest forgets that a claim of p failed.
func (r *replica) uncontest(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.contested, p)
}
