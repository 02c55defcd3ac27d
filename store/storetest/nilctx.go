package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// testNilContext: every call of the contract given a nil context returns
// an error wrapping ErrInvalid, and none panics (a public function never
// does). The calls' other arguments are valid, so the context alone is at
// fault.
func testNilContext(e *env) {
	t := e.t
	s := e.open("member", longTTL)
	o := e.claim("p", s)
	v := e.snap().Version
	var ctx context.Context // nil
	calls := map[string]func() error{
		"OpenSession":    func() error { _, err := e.s.OpenSession(ctx, e.group, "m", 1, time.Second); return err },
		"KeepAlive":      func() error { return keepErr(e.s.KeepAlive(ctx, e.group, s, longTTL)) },
		"CloseSession":   func() error { return e.s.CloseSession(ctx, e.group, s) },
		"ExpireSessions": func() error { _, err := e.s.ExpireSessions(ctx, e.group); return err },
		"Snapshot":       func() error { _, err := e.s.Snapshot(ctx, e.group); return err },
		"Changes":        func() error { _, _, err := e.s.Changes(ctx, e.group, v, 1); return err },
		"Records":        func() error { _, err := e.s.Records(ctx, e.group, []string{"p"}); return err },
		"SetPartitions": func() error {
			_, err := e.s.SetPartitions(ctx, e.group, store.PartitionSet{Partitions: []store.Partition{{ID: "p"}}})
			return err
		},
		"ClaimBatch": func() error { _, err := e.s.ClaimBatch(ctx, e.group, s, []string{"q"}); return err },
		"ReleaseBatch": func() error {
			_, err := e.s.ReleaseBatch(ctx, e.group, s, []store.Ownership{{Partition: "p", Epoch: o.Epoch}})
			return err
		},
		"GiveBack":   func() error { return e.s.GiveBack(ctx, e.group, "p", s, o.Epoch) },
		"Checkpoint": func() error { return e.s.Checkpoint(ctx, e.group, "p", o.Epoch, []byte("x")) },
		"Restore":    func() error { return e.s.Restore(ctx, e.group, "r", 1, []byte("x")) },
		"Request": func() error {
			return e.s.Request(ctx, e.group, store.Request{Action: store.RequestRun, Partition: "p"})
		},
		"ReportLoads": func() error { return e.s.ReportLoads(ctx, e.group, s, []store.Load{{Partition: "p", Load: 1}}) },
		"DeleteGroup": func() error { return e.s.DeleteGroup(ctx, e.group, true) },
	}
	if gl, ok := e.s.(store.GroupLister); ok {
		calls["Groups"] = func() error { _, err := gl.Groups(ctx); return err }
	}
	if ts, ok := e.s.(store.ConnTied); ok {
		calls["TieSession"] = func() error {
			_, err := ts.TieSession(ctx, e.group, s, store.TieConfig{TTL: longTTL, Grace: time.Second})
			return err
		}
	}
	var panicked []string
	for name, call := range calls {
		err := recoverCall(call)
		if strings.HasPrefix(fmt.Sprint(err), "panic: ") {
			panicked = append(panicked, name)
			continue
		}
		wantErr(t, err, store.ErrInvalid, name+" with a nil context", "a nil context is an invalid argument")
	}
	slices.Sort(panicked)
	if len(panicked) > 0 {
		t.Fatalf("with a nil context these calls panicked; want an error wrapping ErrInvalid: %s", strings.Join(panicked, ", "))
	}
	if snap := e.snap(); !snap.Alive(s) {
		t.Fatalf("after calls with a nil context session %q is not alive: %+v", s, snap.Sessions)
	}
}

// ExpectInvalid makes each of calls and fails t for each that panics or
// returns an error that does not wrap store.ErrInvalid; what says what is
// invalid about the calls' arguments ("with a nil context"), for the
// messages. Backends' tests check their own entry points with it.
func ExpectInvalid(t testing.TB, what string, calls map[string]func() error) {
	t.Helper()
	for name, call := range calls {
		if err := recoverCall(call); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s %s: %v; want an error wrapping ErrInvalid", name, what, err)
		}
	}
}

// recoverCall is call's error, or an error starting "panic: " if it
// panicked.
func recoverCall(call func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return call()
}
