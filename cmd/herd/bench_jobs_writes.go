package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/jobs"
)

// runID names one run of a key, as both of its record writes name it.
type runID struct {
	key     string
	epoch   uint64
	slot    int64 // Unix ns
	attempt int
}

// runWrites attributes the jobs scenario's checkpoint writes to the runs
// that made them, by the key, epoch, slot and attempt of the record each
// write carries. A run writes its record before Run is called ("running")
// and after it returns (the outcome), so the writes counted over the same
// window as the runs miss or add a write for every run under way at either
// edge of the window: with --every 1s every key is due at the same whole
// second (slots are spread in whole seconds), and under load a window edge
// inside that burst made 1.66 or 2.10 writes per run out of 2.
type runWrites struct {
	calls  atomic.Int64 // every record write made (or tried), of a run or not
	mu     sync.Mutex
	writes map[runID]int  // record writes made (or tried) per run
	ended  map[runID]bool // the runs whose outcome write was made (or tried)
}

func newRunWrites() *runWrites {
	return &runWrites{writes: map[runID]int{}, ended: map[runID]bool{}}
}

// wrote counts a write of the record value of key, at epoch, in calls and,
// if the value names a run (not a key that never ran, nor a value that is
// not a record), for that run.
func (w *runWrites) wrote(key string, epoch uint64, value []byte) {
	w.calls.Add(1)
	rec, err := jobs.DecodeRecord(value)
	if err != nil || rec.Slot.IsZero() {
		return
	}
	id := runID{key: key, epoch: epoch, slot: rec.Slot.UnixNano(), attempt: rec.Attempt}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes[id]++
	if !rec.Running {
		w.ended[id] = true
	}
}

// idOf is the runID of r.
func idOf(r jobs.Run) runID {
	return runID{key: r.Key, epoch: r.Epoch, slot: r.Slot.UnixNano(), attempt: r.Attempt}
}

// of returns the writes made by the runs ids, after waiting (at most
// limit, or until ctx ends) for the outcome writes of those still under
// way.
func (w *runWrites) of(ctx context.Context, ids []runID, limit time.Duration) int64 {
	deadline := time.Now().Add(limit)
	for !w.allEnded(ids) && time.Now().Before(deadline) {
		if sleepCtx(ctx, 5*time.Millisecond) != nil {
			break
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var n int64
	for _, id := range ids {
		n += int64(w.writes[id])
	}
	return n
}

func (w *runWrites) allEnded(ids []runID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		if !w.ended[id] {
			return false
		}
	}
	return true
}
