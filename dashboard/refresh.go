package dashboard

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"math"
	"time"

	"github.com/herdhq/herd/store"
)

// The shared refresher: what the log does not carry (renewals and
// checkpoints), read again every few seconds by one goroutine per group
// whatever the number of pages, while one is open, and sent to them as a
// "refresh" event.
// One read is a Snapshot (the sessions' TTL left) and the Records of the
// partition set, store.MaxBatch at a time (checkpoint ages, and a jobs
// group's blackboard).

// defaultRefresh is how often a group is read again while a page shows it.
const defaultRefresh = 3 * time.Second

// refreshShare bounds the share of its time a refresher spends reading:
// after a read that took d it waits at least (refreshShare-1) x d, so a
// group whose read is slow (100,000 records, each with its checkpoint) is
// read less often rather than all the time.
const refreshShare = 5

// WithRefresh sets how often the group a page shows is read again for the
// sessions' TTL left, the checkpoint ages and a jobs group's blackboard
// (one read per group whatever the number of pages); default 3s. A read
// that takes longer than a fifth of it spaces the next ones out.
func WithRefresh(d time.Duration) Option {
	return func(h *Handler) {
		if d > 0 {
			h.refreshEvery = d
		}
	}
}

// refreshEvent is the "refresh" event.
type refreshEvent struct {
	Seq     int         `json:"seq"`     // the refresher's reads of the group, this one and failed ones included
	ReadMs  int64       `json:"readMs"`  // how long the read took
	NextMs  int64       `json:"nextMs"`  // until the next read
	Version string      `json:"version"` // the snapshot's version
	Members []memberTTL `json:"members"` // live sessions, sorted by session id
	// N, First and Last name the partition set CkAge follows (in id
	// order): a page whose set differs ignores CkAge.
	N     int    `json:"n"`
	First string `json:"first"`
	Last  string `json:"last"`
	// CkAge is, per partition, the milliseconds since its checkpoint was
	// written on the store's clock when it was read (-1: no checkpoint,
	// -2: one whose time the store does not know): base64 of
	// little-endian int32s.
	CkAge string `json:"ckAge"`
	// Jobs is a jobs group's blackboard, in key order (nil otherwise).
	Jobs []jobRow `json:"jobs,omitempty"`
}

// memberTTL is a live session's TTL left when the group was read.
type memberTTL struct {
	Session string `json:"session"`
	Member  string `json:"member"`
	TTLms   int64  `json:"ttlMs"`
}

// refresh is hb's refresher: it reads the group, publishes what it read
// and waits, until ctx ends.
func (h *Handler) refresh(ctx context.Context, hb *hub) {
	defer h.wg.Done()
	h.refreshers.Add(1)
	defer h.refreshers.Add(-1)
	select {
	case <-ctx.Done():
		return
	case <-hb.ready:
	}
	// The first read waits as long as the follower's snapshot read took,
	// so that its cost (a large group's records) does not fall while the
	// pages decode and draw their first state; so does the first read
	// after the group had no page for a while.
	h.mu.Lock()
	first := min(hb.firstRead, h.refreshEvery)
	h.mu.Unlock()
	if !sleep(ctx, first) {
		return
	}
	for seq := 1; h.awaitPage(ctx, hb, first); seq++ {
		start := time.Now()
		ev, err := h.readRefresh(ctx, hb.group)
		took := time.Since(start)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("dashboard: reading the group's TTLs and checkpoints failed; trying again", "group", hb.group, "err", err)
			}
		}
		wait := max(h.refreshEvery, (refreshShare-1)*took)
		if ev != nil {
			ev.Seq, ev.ReadMs, ev.NextMs = seq, took.Milliseconds(), wait.Milliseconds()
			h.publishRefresh(hb, encode("refresh", ev), time.Now().Add(wait))
		}
		sleep(ctx, wait)
	}
}

// sleep waits d or until ctx ends, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// readRefresh is one read: the group's snapshot, then the records of its
// partition set.
func (h *Handler) readRefresh(ctx context.Context, group string) (*refreshEvent, error) {
	snap, err := h.st.Snapshot(ctx, group)
	if err != nil {
		return nil, err
	}
	n := len(snap.Partitions)
	ev := &refreshEvent{Version: snap.Version.String(), N: n, Members: make([]memberTTL, len(snap.Sessions))}
	for i, s := range snap.Sessions {
		ev.Members[i] = memberTTL{s.ID, s.Member, s.Remaining.Milliseconds()}
	}
	if n > 0 {
		ev.First, ev.Last = snap.Partitions[0].ID, snap.Partitions[n-1].ID
	}
	ages := make([]byte, 4*n)
	ids := make([]string, 0, min(n, store.MaxBatch))
	jobs := snap.Kind == store.KindKeys
	var bb *blackboard
	if jobs {
		bb = newBlackboard(snap, time.Now())
	}
	for start := 0; start < n; start += store.MaxBatch {
		ids = ids[:0]
		for _, p := range snap.Partitions[start:min(start+store.MaxBatch, n)] {
			ids = append(ids, p.ID)
		}
		rs, err := h.st.Records(ctx, group, ids)
		if err != nil {
			return nil, err
		}
		j := 0 // rs is in the order asked, without the partitions that have no record
		for i, id := range ids {
			age := int64(-1)
			if j < len(rs) && rs[j].Partition == id {
				switch {
				case len(rs[j].Checkpoint) == 0:
				case rs[j].CheckpointAge > 0:
					age = min(rs[j].CheckpointAge.Milliseconds(), math.MaxInt32)
				default:
					age = -2 // a checkpoint whose time the store does not know
				}
				if bb != nil {
					bb.record(start+i, &rs[j])
				}
				j++
			}
			binary.LittleEndian.PutUint32(ages[4*(start+i):], uint32(int32(age)))
		}
	}
	ev.CkAge = base64.StdEncoding.EncodeToString(ages)
	if bb != nil {
		ev.Jobs = bb.rows
	}
	return ev, nil
}

// publishRefresh sends ev to every page of hb and keeps it for the pages
// that open before the next one.
func (h *Handler) publishRefresh(hb *hub, ev *event, due time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hb.refresh, hb.refreshDue = ev, due
	h.send(hb, ev)
}
