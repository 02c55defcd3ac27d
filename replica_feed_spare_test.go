package herd

import (
	"context"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/storetest"
)

// spareOf hands the entries of the last call back for the next one to
// decode into only when nothing holds them: not while entries are queued
// (they may be among them), nor while setTarget is to check them
// (unchecked); and not after a call of fewer than MaxBatch entries (a
// member at rest keeps no list).
func TestFeedSpareOnlyUnheld(t *testing.T) {
	r := &replica{work: &store.Snapshot{}}
	f := &feed{r: r}
	cs := make([]store.Change, store.MaxBatch, 2*store.MaxBatch)
	if s := f.spareOf(cs); s == nil || len(s) != 0 || &s[:1][0] != &cs[0] {
		t.Fatal("entries applied and held by nothing: not handed back")
	}
	r.pending, r.npending = [][]store.Change{cs}, len(cs)
	if f.spareOf(cs) != nil {
		t.Fatal("entries still queued: handed back")
	}
	r.pending, r.npending = nil, 0
	r.unchecked, r.nunchecked = [][]store.Change{cs}, len(cs)
	if f.spareOf(cs) != nil {
		t.Fatal("entries kept for setTarget: handed back")
	}
	r.unchecked, r.nunchecked = nil, 0
	if f.spareOf(cs[:store.MaxBatch-1]) != nil {
		t.Fatal("a call of fewer than MaxBatch entries: its list handed back")
	}
}

// The feed's call to the log passes its spare list to a store that
// decodes into one, and gives it up (the store's, then the answer's).
func TestFeedCallPassesSpare(t *testing.T) {
	ctx := context.Background()
	st := &storetest.IntoRecorder{Store: memstore.New()}
	if _, err := st.OpenSession(ctx, "g", "first", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	snap, err := st.Snapshot(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.OpenSession(ctx, "g", "m", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	m := &Member{st: st, runCtx: ctx}
	m.cfg.Group = "g"
	spare := make([]store.Change, 0, 5)
	f := &feed{m: m, r: &m.rep, spare: spare}
	c := logCall{after: snap.Version}
	f.call(ctx, &c)
	if c.err != nil || len(c.cs) != 1 || c.cs[0].Kind != store.SessionOpened {
		t.Fatalf("call: %v, %v; want the session's entry", c.cs, c.err)
	}
	if cap(st.Got) != 5 || &c.cs[0] != &spare[:1][0] || f.spare != nil {
		t.Fatalf("the store was given a list of capacity %d, not the spare; spare kept: %v", cap(st.Got), f.spare != nil)
	}
}
