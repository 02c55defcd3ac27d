package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// endsAfter is a context that ends (Canceled) once Err has been asked n
// times: in the middle of a batch, whatever the batch's statements do.
type endsAfter struct {
	context.Context
	cancel context.CancelFunc
	n      atomic.Int64
}

func (c *endsAfter) Err() error {
	if c.n.Add(-1) <= 0 {
		c.cancel()
	}
	return c.Context.Err()
}

// A ClaimBatch whose context ends in the middle of the batch fails with
// ErrUnavailable wrapping the context's error and commits none of it: its
// one-row statements run on a context that cannot be cancelled (wtx.step),
// and the batch checks the call's own between them.
func TestClaimBatchContextEndsMidBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herd.db")
	s := open(t, path)
	sess, err := s.OpenSession(t.Context(), "g", "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]string, 500)
	for i := range ps {
		ps[i] = fmt.Sprintf("p%03d", i)
	}
	inner, cancel := context.WithCancel(t.Context())
	defer cancel()
	ctx := &endsAfter{Context: inner, cancel: cancel}
	ctx.n.Store(200) // asked about 5 times before the batch's loop, then once per partition
	_, err = s.ClaimBatch(ctx, "g", sess, ps)
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("ClaimBatch whose context ended mid-batch: %v; want ErrUnavailable wrapping context.Canceled", err)
	}
	snap, err := s.Snapshot(t.Context(), "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Owners) != 0 {
		t.Errorf("%d records after a batch whose context ended; want none (rolled back)", len(snap.Owners))
	}
}
