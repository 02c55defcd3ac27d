package faultstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/storetest"
)

// ChangesInto passes the caller's list on to the inner store's
// ChangesInto, and is Changes over a store without one.
func TestChangesIntoPassesTheList(t *testing.T) {
	ctx := context.Background()
	inner := &storetest.IntoRecorder{Store: memstore.New()}
	fs := faultstore.Wrap(inner)
	from := opened(t, fs)
	dst := make([]store.Change, 0, 4)
	cs, _, err := fs.ChangesInto(ctx, "g", from, 4, dst)
	if err != nil || len(cs) != 1 || cs[0].Kind != store.SessionOpened {
		t.Fatalf("ChangesInto: %v, %v; want the session's entry", cs, err)
	}
	if cap(inner.Got) != 4 || &cs[0] != &dst[:1][0] {
		t.Fatal("the inner store's ChangesInto was not given the list")
	}

	plain := faultstore.Wrap(memstore.New())
	cs, _, err = plain.ChangesInto(ctx, "g", opened(t, plain), 4, dst)
	if err != nil || len(cs) != 1 || cs[0].Kind != store.SessionOpened {
		t.Fatalf("ChangesInto over a store without one: %v, %v; want the session's entry", cs, err)
	}
}

// opened opens a session in group g of s after a first one, and returns
// the version before it.
func opened(t *testing.T, s *faultstore.Store) store.Version {
	ctx := context.Background()
	if _, err := s.OpenSession(ctx, "g", "first", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenSession(ctx, "g", "m", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	return snap.Version
}
