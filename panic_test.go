package herd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/redisstore"
)

// noPanic runs f and fails the test if it panics.
func noPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", name, r)
		}
	}()
	f()
}

// wantErr fails the test unless err wraps store.ErrInvalid and mentions what.
func wantErr(t *testing.T, name string, err error, what string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), what) {
		t.Errorf("%s: %v, want an error mentioning %q", name, err, what)
	}
}

// Every exported function of the package, given bad arguments, returns a
// clear error instead of panicking. (Methods called on a nil *Member or a
// nil herdtest.Gate are not covered; a Claim made outside herd is.)
func TestPanicFreeBadArguments(t *testing.T) {
	var nilCtx context.Context
	ok := func(*herd.Claim) error { return nil }
	cfg := herd.Config{Group: "g", Member: "m", Handler: ok}
	noPanic(t, "Numbered(-1)", func() {
		ps := herd.Numbered(-1)
		if ps == nil || len(ps) != 0 {
			t.Errorf("Numbered(-1) = %#v, want an empty, non-nil set", ps)
		}
		c := cfg
		c.Partitions = ps
		wantErr(t, "Validate with Numbered(-1)", c.Validate(), "Partitions is empty")
		_, err := herd.Join(t.Context(), memstore.New(), c)
		wantErr(t, "Join with Numbered(-1)", err, "Partitions is empty")
	})
	noPanic(t, "Numbered(0)", func() { _ = herd.Numbered(0) })
	noPanic(t, "Join(nil ctx)", func() {
		_, err := herd.Join(nilCtx, memstore.New(), cfg)
		wantErr(t, "Join(nil ctx)", err, "context is nil")
	})
	noPanic(t, "Join(nil store)", func() {
		_, err := herd.Join(t.Context(), nil, cfg)
		wantErr(t, "Join(nil store)", err, "store is nil")
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Join(nil store): %v, want ErrInvalid", err)
		}
	})
	noPanic(t, "Join(typed nil store)", func() {
		var rs *redisstore.Store
		_, err := herd.Join(t.Context(), rs, cfg)
		wantErr(t, "Join(typed nil store)", err, "nil *redisstore.Store")
	})
	noPanic(t, "Join(zero Config)", func() {
		_, err := herd.Join(t.Context(), memstore.New(), herd.Config{})
		wantErr(t, "Join(zero Config)", err, "Handler is required")
	})
	noPanic(t, "Config.Validate(bad)", func() {
		c := cfg
		c.CheckpointInterval = -1
		wantErr(t, "negative CheckpointInterval", c.Validate(), "CheckpointInterval")
		c.CheckpointInterval = 1
		wantErr(t, "1ns CheckpointInterval", c.Validate(), "CheckpointInterval")
		c = cfg
		c.Weight = -1
		c.Partitions = []herd.Partition{{ID: ""}}
		wantErr(t, "negative weight", c.Validate(), "Weight")
	})
	noPanic(t, "Claim made outside herd", func() {
		var c herd.Claim
		if c.Context() == nil || c.Context().Err() != nil {
			t.Error("a zero Claim's Context is nil or done")
		}
		if err := c.Mark([]byte("x")); err != nil {
			t.Errorf("Mark on a zero Claim: %v", err)
		}
		if string(c.LastCheckpoint()) != "x" {
			t.Errorf("LastCheckpoint on a zero Claim after Mark(x) = %q", c.LastCheckpoint())
		}
		wantErr(t, "Mark(too long)", c.Mark(make([]byte, store.MaxCheckpointLength+1)), "over the limit")
		wantErr(t, "Checkpoint on a zero Claim", c.Checkpoint(context.Background(), []byte("x")), "not made by a member")
	})
	synctest.Test(t, func(t *testing.T) {
		claims := make(chan *herd.Claim, 1)
		m, err := herd.Join(t.Context(), memstore.New(), herd.Config{Group: "g", Member: "m", Partitions: herd.Numbered(1),
			Handler: func(c *herd.Claim) error { claims <- c; <-c.Context().Done(); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		c := <-claims
		noPanic(t, "Claim.Checkpoint(nil ctx)", func() {
			wantErr(t, "Checkpoint(nil ctx)", c.Checkpoint(nilCtx, []byte("x")), "context is nil")
		})
		noPanic(t, "Claim.Checkpoint(too long)", func() {
			wantErr(t, "Checkpoint(too long)", c.Checkpoint(t.Context(), make([]byte, store.MaxCheckpointLength+1)), "over the limit")
		})
		noPanic(t, "Member.SetPartitions(nil ctx)", func() {
			wantErr(t, "SetPartitions(nil ctx)", m.SetPartitions(nilCtx, herd.Numbered(2)), "context is nil")
		})
		noPanic(t, "Member.SetPartitions(bad ids)", func() {
			wantErr(t, "SetPartitions(bad ids)", m.SetPartitions(t.Context(), []herd.Partition{{ID: "a\x00"}}), "control character")
		})
		noPanic(t, "Member.Leave(nil ctx)", func() {
			wantErr(t, "Leave(nil ctx)", m.Leave(nilCtx), "context is nil")
		})
		if err := m.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// DeleteGroup and RetryUnavailable, given a nil context, store or op,
// return an error wrapping ErrInvalid instead of panicking.
func TestPanicFreeDeleteGroupAndRetry(t *testing.T) {
	var nilCtx context.Context
	var rs *redisstore.Store
	unavailable := func(context.Context) error { return store.ErrUnavailable }
	calls := map[string]func() error{
		"DeleteGroup(nil ctx)":         func() error { return herd.DeleteGroup(nilCtx, memstore.New(), "g", false) },
		"DeleteGroup(nil store)":       func() error { return herd.DeleteGroup(t.Context(), nil, "g", false) },
		"DeleteGroup(typed nil store)": func() error { return herd.DeleteGroup(t.Context(), rs, "g", false) },
		"RetryUnavailable(nil ctx)":    func() error { return herd.RetryUnavailable(nilCtx, nil, "open", unavailable) },
		"RetryUnavailable(nil op)":     func() error { return herd.RetryUnavailable(t.Context(), nil, "open", nil) },
	}
	for name, call := range calls {
		noPanic(t, name, func() {
			if err := call(); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%s: %v, want an error wrapping ErrInvalid", name, err)
			}
		})
	}
}
