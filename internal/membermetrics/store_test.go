package membermetrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/storetest"
)

// The metrics' store passes a caller's list on to the store's ChangesInto.
func TestChangesIntoPassesTheList(t *testing.T) {
	ctx := context.Background()
	inner := &storetest.IntoRecorder{Store: memstore.New()}
	st := New("g", "m", errors.New("fenced"), Gauges{}).Store(inner)
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
	dst := make([]store.Change, 0, 4)
	in := st.(interface {
		ChangesInto(context.Context, string, store.Version, int, []store.Change) ([]store.Change, store.Version, error)
	})
	cs, _, err := in.ChangesInto(ctx, "g", snap.Version, 4, dst)
	if err != nil || len(cs) != 1 || cap(inner.Got) != 4 || &cs[0] != &dst[:1][0] {
		t.Fatalf("ChangesInto: %v, %v; the store given a list of capacity %d, want the caller's", cs, err, cap(inner.Got))
	}
}
