package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
)

// The group's log is the table herd_log, one row per entry, keyed by
// (gid, seq), appended by the very transaction that makes the change
// (write.go). The group's row holds the sequence number and tag of the
// last entry, so a snapshot reads its version in the same transaction as
// the records.
//
// Tags chain the entries: an entry's tag is a 63-bit FNV-1a hash of the
// previous entry's tag and its own fields; a history starts from a random
// tag, drawn when the group's row is created (the first write after the
// group was deleted, or in a new file). Changes checks the tag of the
// entry at the reader's version, so a reader never continues into another
// history: the group deleted and written again, or the file replaced by
// an older copy (a backup restored) and written on from there, which
// writes other entries at the same sequence numbers.
//
// The log keeps its last logLimit entries, and the one before them (whose
// tag a reader at that version needs); older rows are deleted by the
// transaction that appends past the bound.

// defaultChangesBlock is the longest one Changes call waits at the end of
// the log before returning no entries (the caller calls again). The wait
// is in this process (a commit wakes it, see notify.go) and a cancelled
// call ends at once, so a long one costs nothing and a member at rest
// makes its renewals and hardly any other call.
const defaultChangesBlock = 5 * time.Minute

// encodePartitions is a PartitionsSet entry's set as stored: lines of
// "<id>\t<weight>", sorted by id (ids hold no control characters).
func encodePartitions(c store.Change) string {
	if c.Kind == store.LoadsReported {
		return encodeLoads(c.Loads)
	}
	if c.Kind != store.PartitionsSet {
		return ""
	}
	var b strings.Builder
	for _, p := range c.Partitions {
		b.WriteString(p.ID)
		b.WriteByte('\t')
		b.WriteString(strconv.Itoa(p.Weight))
		b.WriteByte('\n')
	}
	return b.String()
}

func decodePartitions(s string) ([]store.Partition, bool) {
	ps := []store.Partition{}
	for line := range strings.SplitSeq(s, "\n") {
		if line == "" {
			continue
		}
		id, w, ok := strings.Cut(line, "\t")
		weight, err := strconv.Atoi(w)
		if !ok || err != nil || weight < 0 || store.ValidateID("partition", id) != nil {
			return nil, false
		}
		ps = append(ps, store.Partition{ID: id, Weight: weight})
	}
	return ps, true
}

// chain is the tag of entry c (with its encoded partitions) after an
// entry tagged prev.
func chain(prev uint64, c store.Change, parts string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], prev)
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[:], uint64(c.Kind))
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[:], uint64(c.Weight))
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[:], c.Epoch)
	h.Write(b[:])
	for _, s := range []string{c.Session, c.Member, c.Partition, c.GivenBack, parts} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	t := h.Sum64() >> 1
	if t == 0 {
		t = 1
	}
	return t
}

// gone is Changes' ErrVersionGone.
func gone(after store.Version, format string, args ...any) error {
	return fmt.Errorf("sqlitestore: changes after %v: %s: %w", after, fmt.Sprintf(format, args...), store.ErrVersionGone)
}

// Changes implements store.Store. It reads the entries after after in one
// read transaction; at the end of the log it waits for a commit to the
// file (see notify.go) and reads again, for at most 30 s, then returns no
// entries. An entry that cannot be decoded, or whose tag does not follow
// from the previous one (the table edited by hand), ends the version:
// ErrVersionGone.
func (s *Store) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	if err := s.begin(ctx, "changes", store.ValidateChanges(group, max)); err != nil {
		return nil, after, err
	}
	return s.changes(ctx, group, after, max)
}

// changes is Changes, once the arguments are checked.
func (s *Store) changes(ctx context.Context, group string, after store.Version, limit int) ([]store.Change, store.Version, error) {
	block := defaultChangesBlock
	if d, ok := ctx.Deadline(); ok {
		block = min(block, time.Until(d)-50*time.Millisecond)
	}
	timer := time.NewTimer(max(block, 0))
	defer timer.Stop()
	for {
		wake := s.notify.next() // before the read: a commit after it wakes us
		var out []store.Change
		v := after
		err := s.read(ctx, "changes", func(c conn) error {
			var err error
			out, v, err = readLog(c, group, after, limit)
			return err
		})
		if err != nil || len(out) > 0 {
			return out, v, err
		}
		select {
		case <-wake:
		case <-timer.C:
			return nil, after, nil
		case <-ctx.Done():
			return nil, after, fmt.Errorf("sqlitestore: changes: %w: %w", store.ErrUnavailable, ctx.Err())
		case <-s.done:
			return nil, after, fmt.Errorf("sqlitestore: changes: store is closed: %w", store.ErrUnavailable)
		}
	}
}

// readLog reads at most max entries after after. No entries and no error:
// the log ends at after.
func readLog(c conn, name string, after store.Version, limit int) ([]store.Change, store.Version, error) {
	g, err := loadGroup(c, name)
	if err != nil {
		return nil, after, err
	}
	zero := after == store.Version{}
	switch {
	case g == nil || g.seq == 0:
		if zero {
			return nil, after, nil
		}
		return nil, after, &bailout{gone(after, "the group has no log")}
	case zero:
		return nil, after, &bailout{gone(after, "the group's log was written since (it is at %d)", g.seq)}
	case after.Seq > g.seq:
		return nil, after, &bailout{gone(after, "the log ends at %d", g.seq)}
	case after.Seq == g.seq && after.Tag != g.tag:
		return nil, after, &bailout{gone(after, "entry %d is of another history of the group", after.Seq)}
	case after.Seq == g.seq:
		return nil, after, nil
	}
	// One query reads the entry at after too, to check its tag: the
	// reader's history.
	rows, err := c.rows(qLogEntries, g.id, int64(after.Seq), limit+1)
	if err != nil {
		return nil, after, err
	}
	defer rows.Close()
	out := make([]store.Change, 0, min(uint64(limit), g.seq-after.Seq))
	v, prev, atAfter := after, after.Tag, true
	for rows.Next() {
		var seq, tag, kind, weight, epoch, at int64
		var e store.Change
		var parts sql.NullString
		if err := rows.Scan(&seq, &tag, &kind, &e.Session, &e.Member, &weight, &e.Partition, &epoch, &e.GivenBack, &parts, &at); err != nil {
			return nil, after, err
		}
		if atAfter {
			atAfter = false
			switch {
			case uint64(seq) != after.Seq:
				return nil, after, &bailout{gone(after, "entry %d was trimmed from the log", after.Seq)}
			case uint64(tag) != after.Tag:
				return nil, after, &bailout{gone(after, "entry %d is of another history of the group", after.Seq)}
			}
			continue
		}
		e.Kind, e.Weight, e.Epoch = store.ChangeKind(kind), int(weight), uint64(epoch)
		e.Version = store.Version{Seq: uint64(seq), Tag: uint64(tag)}
		if e.Version.Seq != v.Seq+1 {
			return nil, after, &bailout{gone(after, "the log continues at %d, not %d", seq, v.Seq+1)}
		}
		if zero && e.Version.Seq == 1 {
			prev = 0 // the first entry of a history: its start is not kept
		} else if e.Version.Tag != chain(prev, e, parts.String) {
			return nil, after, &bailout{gone(after, "entry %d does not follow entry %d (the log was changed by hand?)", seq, v.Seq)}
		}
		e = loaded(e)
		e.At = logTime(at)
		if err := decodeEntry(&e, parts); err != nil {
			return nil, after, &bailout{gone(after, "entry %d: %v", seq, err)}
		}
		out = append(out, e)
		prev, v = e.Version.Tag, e.Version
	}
	if err := rows.Err(); err != nil {
		return nil, after, err
	}
	if atAfter {
		return nil, after, &bailout{gone(after, "entry %d was trimmed from the log", after.Seq)}
	}
	if zero && len(out) > 0 && out[0].Version.Seq != 1 {
		return nil, after, &bailout{gone(after, "the log's first entries were trimmed")}
	}
	return out, v, nil
}

// logTime is an entry's At from its column at (µs since 1970): 0 (the
// column's default, for an entry written by a herd before it) or less is
// unknown, the zero time.
func logTime(us int64) time.Time {
	if us <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// decodeEntry checks an entry read from the table and decodes its
// partition set.
func decodeEntry(c *store.Change, parts sql.NullString) error {
	id := func(kind, v string) error { return store.ValidateID(kind, v) }
	var err error
	switch c.Kind {
	case store.SessionOpened:
		err = errors.Join(id("session", c.Session), id("member", c.Member))
		if c.Weight < 0 {
			err = fmt.Errorf("negative weight %d", c.Weight)
		}
	case store.SessionClosed, store.SessionExpired:
		err = id("session", c.Session)
	case store.Claimed:
		err = errors.Join(id("partition", c.Partition), id("session", c.Session), id("member", c.Member))
	case store.Released:
		err = errors.Join(id("partition", c.Partition), id("session", c.Session))
		if c.GivenBack != "" && c.GivenBack != c.Session {
			err = fmt.Errorf("given back by %q, not by the releasing session %q", c.GivenBack, c.Session)
		}
	case store.Restored:
		err = id("partition", c.Partition)
	case store.Requested:
		err = c.Request().Validate()
	case store.LoadsReported:
		if c.Loads, err = store.ParseLoadEntries(strings.SplitSeq(parts.String, "\n")); err == nil {
			err = id("session", c.Session)
		}
	case store.PartitionsSet:
		ps, ok := decodePartitions(parts.String)
		if !ok || !parts.Valid {
			return errors.New("malformed partition set")
		}
		slices.SortFunc(ps, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
		c.Partitions = ps
	default:
		return fmt.Errorf("unknown kind %d", c.Kind)
	}
	if err == nil && (c.Kind == store.Claimed || c.Kind == store.Released || c.Kind == store.Restored) && c.Epoch == 0 {
		err = errors.New("epoch 0")
	}
	return err
}
