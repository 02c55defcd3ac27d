package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
)

// The group's log is the table log: one row per entry, (gid, seq) its key,
// written by the same function call (so the same transaction) as the
// change it records, under the group's row lock. Each entry gets a random
// 53-bit tag, and the group's row holds the sequence number and tag of the
// last entry, so a store.Version is (seq, tag) of an entry. A reader's
// version can be continued only if the entry (seq, tag) is still in the
// log: a group deleted and written again, or a primary that lost its
// latest commits in a failover and wrote others at the same sequence
// numbers, has other tags there, and the reader gets ErrVersionGone
// instead of entries of another history.
//
// Entries older than the log's bound are deleted in steps of a quarter of
// it by the call that crosses it (the group's log_start says where the log
// begins).

// maxChangesRows bounds the entries one Changes call returns.
const maxChangesRows = 10_000

// gone is Changes' ErrVersionGone.
func gone(after store.Version, format string, args ...any) error {
	return fmt.Errorf("pgstore: Changes after %v: %s: %w", after, fmt.Sprintf(format, args...), store.ErrVersionGone)
}

// Changes implements store.Store. One statement reads the group's version
// and the entries from after on. At the end of the log the call waits for
// a notification of the group (LISTEN), or for the poll interval when
// LISTEN is off or not working, and reads again; it returns when there are
// entries, the version is gone, or ctx ends.
func (s *Store) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	if err := s.begin(ctx, "Changes", store.ValidateChanges(group, max)); err != nil {
		return nil, after, err
	}
	max = min(max, maxChangesRows)
	// With a deadline, the wait ends a little before it, so that a call at
	// rest answers "nothing new" rather than run its last read of the
	// table into the deadline (an error, which says the store did not
	// answer in time).
	var atRest <-chan time.Time
	if d, ok := ctx.Deadline(); ok {
		wait := time.Until(d) - 50*time.Millisecond
		if wait < 0 { // not the builtin max: max is an argument here
			wait = 0
		}
		stop := time.NewTimer(wait)
		defer stop.Stop()
		atRest = stop.C
	}
	for {
		// Register before reading: a notification after it wakes us. The
		// notes of the group's notifications may hold the entries, or say
		// that there are none yet; else the table is read.
		woken := s.hub.wait(group)
		if cs := s.hub.cached(group, after, max); len(cs) > 0 {
			return cs, cs[len(cs)-1].Version, nil
		}
		if !s.hub.upToDate(group, after) {
			s.logReads.Add(1)
			cs, next, err := s.readChanges(ctx, group, after, max)
			if err != nil || len(cs) > 0 {
				return cs, next, err
			}
		}
		t := time.NewTimer(s.hub.interval())
		select {
		case <-woken:
		case <-t.C:
		case <-atRest:
			t.Stop()
			return nil, after, nil
		case <-ctx.Done():
			t.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, after, nil // read to its end, at rest until the deadline
			}
			return nil, after, fmt.Errorf("pgstore: Changes: %w: %w", store.ErrUnavailable, ctx.Err())
		}
		t.Stop()
		if err := s.begin(ctx, "Changes", nil); err != nil {
			return nil, after, err
		}
	}
}

// readChanges reads the entries after after; none (and no error) at the
// end of the log.
func (s *Store) readChanges(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	var out []store.Change
	var outErr error
	err := s.do(ctx, "Changes", func(ctx context.Context) error {
		out, outErr = nil, nil
		rows, err := s.pool.Query(ctx, s.q.changes, group, int64(after.Seq), int64(max+1))
		if err != nil {
			return err
		}
		defer rows.Close()
		first := true
		v := after
		for rows.Next() {
			var gseq, gtag, start int64
			var seq, tag *int64
			var kind *int16
			var session, member, partition, epoch, givenBack *string
			var weight *int32
			var ids []string
			var weights []int32
			var at *int64
			if err := rows.Scan(&gseq, &gtag, &start, &seq, &tag, &kind, &session, &member, &weight, &partition,
				&epoch, &givenBack, &ids, &weights, &at); err != nil {
				return err
			}
			if first {
				first = false
				cur := store.Version{Seq: uint64(gseq), Tag: uint64(gtag)}
				switch {
				case gseq == 0:
					if after.Seq != 0 {
						outErr = gone(after, "the group has no log")
					}
					return nil
				case after.Seq == 0:
					outErr = gone(after, "the log was written since (it is at %v)", cur)
					return nil
				case after.Seq > uint64(gseq):
					outErr = gone(after, "the log ends at %d", gseq)
					return nil
				case after.Seq < uint64(start):
					outErr = gone(after, "the log starts at %d (older entries were trimmed)", start)
					return nil
				case seq == nil || uint64(*seq) != after.Seq || tag == nil || uint64(*tag) != after.Tag:
					outErr = gone(after, "the log is another history of the group (it is at %v)", cur)
					return nil
				}
				continue // the entry at after itself
			}
			if seq == nil || uint64(*seq) != v.Seq+1 || tag == nil || kind == nil {
				outErr = gone(after, "the log has a gap after %d", v.Seq)
				return nil
			}
			c, err := decodeEntry(store.Version{Seq: uint64(*seq), Tag: uint64(*tag)}, *kind,
				deref(session), deref(member), weight, deref(partition), deref(epoch), deref(givenBack), ids, weights)
			if err != nil {
				outErr = gone(after, "%v", err)
				return nil
			}
			if at != nil {
				c.At = logTime(*at)
			}
			out = append(out, c)
			v = c.Version
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if first && after.Seq != 0 {
			outErr = gone(after, "the group has no log")
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, after, err
	case outErr != nil:
		return nil, after, outErr
	case len(out) == 0:
		return nil, after, nil
	}
	return out, out[len(out)-1].Version, nil
}

// logTime is an entry's At from its time in µs since 1970 (column at);
// 0 or less is unknown, the zero time.
func logTime(us int64) time.Time {
	if us <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// decodeEntry makes a store.Change of one log row. An entry that does not
// decode (written by something other than herd) ends the reader's version.
func decodeEntry(v store.Version, kind int16, session, member string, weight *int32, partition, epoch, givenBack string,
	ids []string, weights []int32) (store.Change, error) {
	c := store.Change{Version: v, Session: session, Member: member, Partition: partition, GivenBack: givenBack}
	bad := func(what string) (store.Change, error) {
		return store.Change{}, fmt.Errorf("entry %v (kind %d) cannot be decoded: %s", v, kind, what)
	}
	parseEpoch := func() error {
		e, err := strconv.ParseUint(epoch, 10, 64)
		if err != nil || e == 0 {
			return errors.New("bad epoch")
		}
		c.Epoch = e
		return nil
	}
	switch kind {
	case kindOpened:
		c.Kind = store.SessionOpened
		if weight == nil || *weight < 0 || session == "" {
			return bad("no session or weight")
		}
		c.Weight = int(*weight)
	case kindClosed, kindExpired:
		c.Kind = store.SessionClosed
		if kind == kindExpired {
			c.Kind = store.SessionExpired
		}
		if session == "" {
			return bad("no session")
		}
	case kindClaimed, kindReleased:
		c.Kind = store.Claimed
		if kind == kindReleased {
			c.Kind = store.Released
		}
		if partition == "" || session == "" || parseEpoch() != nil {
			return bad("no partition, session or epoch")
		}
	case kindRestored:
		c.Kind = store.Restored
		if partition == "" || parseEpoch() != nil {
			return bad("no partition or epoch")
		}
	case kindRequested:
		c.Kind, c.Action, c.Session = store.Requested, session, ""
		if err := c.Request().Validate(); err != nil {
			return bad(err.Error())
		}
	case kindLoads:
		c.Kind = store.LoadsReported
		ls, err := store.ParseLoadEntries(slices.Values(ids))
		if err != nil || session == "" {
			return bad(fmt.Sprintf("no session, or loads that do not decode (%v)", err))
		}
		c.Loads = ls
	case kindSet:
		c.Kind = store.PartitionsSet
		if len(ids) != len(weights) {
			return bad("partition ids and weights differ in number")
		}
		c.Partitions = make([]store.Partition, len(ids))
		for i := range ids {
			c.Partitions[i] = store.Partition{ID: ids[i], Weight: int(weights[i])}
		}
		slices.SortFunc(c.Partitions, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
	default:
		return bad("unknown kind")
	}
	return c, nil
}
