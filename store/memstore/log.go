package memstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/herdhq/herd/store"
)

// DefaultLogLimit is how many entries of a group's log the store keeps by
// default: a whole first placement of 100,000 partitions (one Claimed entry
// each), so a member that lags behind it does not have to take a new
// snapshot. An entry costs about 100 bytes, 10 MB for the whole log.
const DefaultLogLimit = 100_000

// groupLog is a group's log: the last entries, the history's tag and the
// sequence number of the last entry. The store never loses part of a log
// (only all of it, with the group: DeleteGroup, Wipe), so one random tag per
// history tells histories apart (see store.Version).
type groupLog struct {
	gen     uint64         // the history's tag; 0 until the first entry is written
	seq     uint64         // of the last entry
	entries []store.Change // the last entries kept, entries[i].Version.Seq == seq-len+1+i
	notify  chan struct{}  // closed by the next append; nil when nobody waits
}

func (l *groupLog) version() store.Version { return store.Version{Seq: l.seq, Tag: l.gen} }

// wake wakes every reader waiting for the next entry.
func (l *groupLog) wake() {
	if l.notify != nil {
		close(l.notify)
		l.notify = nil
	}
}

// logChange appends c to g's log, starting a history if there is none.
// It keeps at least s.logLimit entries, trimming in steps of a quarter of
// the limit so that trimming costs O(1) per entry.
func (s *Store) logChange(g *group, c store.Change) {
	l := &g.log
	for l.gen == 0 {
		l.gen = rand.Uint64()
	}
	l.seq++
	c.Version, c.At = l.version(), s.at
	l.entries = append(l.entries, c)
	if len(l.entries) > s.logLimit+s.logLimit/4 {
		l.entries = slices.Clone(l.entries[len(l.entries)-s.logLimit:])
	}
	l.wake()
}

// nextExpiry is the time from now until the earliest expiry of a live
// session of g, 0 if none is alive.
func (g *group) nextExpiry(now time.Time) time.Duration {
	var next time.Duration
	for i, ss := range g.sessions {
		if d := ss.expires.Sub(now); i == 0 || d < next {
			next = d
		}
	}
	return next
}

// Changes implements store.Store. It blocks until an entry is appended or
// ctx ends, without a goroutine or a timer.
func (s *Store) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	args := store.ValidateChanges(group, max)
	for {
		if _, err := s.begin(ctx, "changes", args); err != nil {
			return nil, after, err
		}
		l := &s.group(group, true).log
		// Read under the lock: the errors below are made after unlocking.
		gen, seq := l.gen, l.seq
		first := seq - uint64(len(l.entries)) + 1 // seq of entries[0]
		switch {
		case gen != after.Tag:
			s.mu.Unlock()
			return nil, after, fmt.Errorf("memstore: changes after %v: the log is another history (tag %x): %w", after, gen, store.ErrVersionGone)
		case after.Seq > seq:
			s.mu.Unlock()
			return nil, after, fmt.Errorf("memstore: changes after %v: the log ends at %d: %w", after, seq, store.ErrVersionGone)
		case after.Seq+1 < first:
			s.mu.Unlock()
			return nil, after, fmt.Errorf("memstore: changes after %v: the log starts at %d: %w", after, first, store.ErrVersionGone)
		case after.Seq < l.seq:
			i := after.Seq + 1 - first
			n := min(uint64(max), l.seq-after.Seq)
			out := slices.Clone(l.entries[i : i+n])
			s.mu.Unlock()
			return out, out[len(out)-1].Version, nil
		}
		if l.notify == nil {
			l.notify = make(chan struct{})
		}
		ch := l.notify
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, after, nil // at rest until the deadline
			}
			return nil, after, fmt.Errorf("memstore: changes: %w", ctx.Err())
		}
	}
}

// ExpireSessions implements store.Store. Every call expires the due
// sessions of every group (see begin); this one reports the next expiry.
func (s *Store) ExpireSessions(ctx context.Context, group string) (time.Duration, error) {
	now, err := s.begin(ctx, "expire sessions", store.ValidateGroup(group))
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	g := s.group(group, false)
	if g == nil {
		return 0, nil
	}
	return g.nextExpiry(now), nil
}

// ClaimBatch implements store.Store, under one lock.
func (s *Store) ClaimBatch(ctx context.Context, group, session string, partitions []string) ([]store.ClaimResult, error) {
	now, err := s.begin(ctx, "claim batch", store.ValidateClaimBatch(group, session, partitions))
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	g := s.group(group, false)
	if g == nil || !g.alive(session) {
		return nil, fmt.Errorf("memstore: claim batch by session %q: %w", session, store.ErrSessionExpired)
	}
	out := make([]store.ClaimResult, len(partitions))
	for i, p := range partitions {
		out[i].Ownership, out[i].Err = s.claimLocked(g, p, session, now)
	}
	return out, nil
}

// ReleaseBatch implements store.Store, under one lock.
func (s *Store) ReleaseBatch(ctx context.Context, group, session string, held []store.Ownership) ([]error, error) {
	if _, err := s.begin(ctx, "release batch", store.ValidateReleaseBatch(group, session, held)); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	g := s.group(group, false)
	out := make([]error, len(held))
	for i, o := range held {
		out[i] = s.releaseLocked(g, o.Partition, session, o.Epoch, false)
	}
	return out, nil
}
