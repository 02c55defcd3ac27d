package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// TestStoreHasEachOperationOnce: the contract is what the runtime and the
// tools call, each operation once. A single claim or release is a batch of
// one (store.Claim, store.Release), not a method every backend writes.
func TestStoreHasEachOperationOnce(t *testing.T) {
	want := []string{"ClaimBatch", "Changes", "Checkpoint", "Close", "CloseSession", "DeleteGroup",
		"ExpireSessions", "GiveBack", "KeepAlive", "OpenSession", "Records", "ReleaseBatch", "ReportLoads", "Request", "Restore",
		"SetPartitions", "Snapshot"}
	typ := reflect.TypeFor[store.Store]()
	var got []string
	for i := range typ.NumMethod() {
		got = append(got, typ.Method(i).Name)
	}
	if len(got) != len(want) {
		t.Fatalf("store.Store has %d methods %q; want the %d %q", len(got), got, len(want), want)
	}
	for _, name := range want {
		if _, ok := typ.MethodByName(name); !ok {
			t.Errorf("store.Store lacks %s; it has %q", name, got)
		}
	}
}

// TestClaimAndReleaseAreBatchesOfOne: store.Claim and store.Release give
// what one entry of a batch gives, with the per-partition errors as the
// call's error.
func TestClaimAndReleaseAreBatchesOfOne(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	defer st.Close()
	a, err := st.OpenSession(ctx, "g", "a", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.OpenSession(ctx, "g", "b", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	o, err := store.Claim(ctx, st, "g", "p", a)
	if err != nil || o.Partition != "p" || o.Session != a || o.Member != "a" || o.Epoch == 0 {
		t.Fatalf("Claim of a free partition: %+v, %v; want p owned by %s at an epoch", o, err, a)
	}
	if _, err := store.Claim(ctx, st, "g", "p", b); !errors.Is(err, store.ErrClaimed) {
		t.Errorf("Claim of a partition another live session holds: %v; want ErrClaimed", err)
	}
	if err := store.Release(ctx, st, "g", "p", b, o.Epoch); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("Release by a session that does not hold it: %v; want ErrNotOwner", err)
	}
	if err := store.Release(ctx, st, "g", "p", a, o.Epoch); err != nil {
		t.Errorf("Release by the owner at its epoch: %v", err)
	}
	if _, err := store.Claim(ctx, st, "g", "p", "no-such-session"); !errors.Is(err, store.ErrSessionExpired) {
		t.Errorf("Claim by an unknown session: %v; want ErrSessionExpired", err)
	}
	if err := store.Release(ctx, st, "g", "p", a, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Release at epoch 0: %v; want ErrInvalid", err)
	}
}

// shortBatches answers every batch with no result, as a broken backend
// might: the helpers must say so, not index past the end.
type shortBatches struct{ store.Store }

func (shortBatches) ClaimBatch(context.Context, string, string, []string) ([]store.ClaimResult, error) {
	return nil, nil
}

func (shortBatches) ReleaseBatch(context.Context, string, string, []store.Ownership) ([]error, error) {
	return nil, nil
}

func TestClaimAndReleaseReportAShortReply(t *testing.T) {
	ctx := t.Context()
	if _, err := store.Claim(ctx, shortBatches{}, "g", "p", "s"); err == nil {
		t.Error("Claim with no result from the store: no error")
	}
	if err := store.Release(ctx, shortBatches{}, "g", "p", "s", 1); err == nil {
		t.Error("Release with no result from the store: no error")
	}
}
