package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// Begin fails a call on its arguments first (ErrInvalid), then on a
// closed store or an ended context (ErrUnavailable), naming the backend
// and the call.
func TestBegin(t *testing.T) {
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	args := ValidateGroup("")
	for _, tc := range []struct {
		ctx    context.Context
		args   error
		closed bool
		want   error
	}{
		{t.Context(), nil, false, nil},
		{ended, args, true, ErrInvalid},
		{ended, nil, true, ErrUnavailable},
		{ended, nil, false, context.Canceled},
	} {
		err := Begin(tc.ctx, "mystore", "Snapshot", tc.args, tc.closed)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Begin(args %v, closed %v, ctx %v) = %v; want %v", tc.args, tc.closed, tc.ctx.Err(), err, tc.want)
		}
		if tc.args == nil && err != nil && !errors.Is(err, ErrUnavailable) {
			t.Errorf("Begin(closed %v, ctx %v) = %v; want ErrUnavailable", tc.closed, tc.ctx.Err(), err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "mystore: Snapshot: ") {
			t.Errorf("Begin's error %q does not start with the backend and the call", err)
		}
	}
}

// Begin refuses a nil context with ErrInvalid, closed store or not, and
// does not panic.
func TestBeginNilContext(t *testing.T) {
	var nilCtx context.Context
	for _, closed := range []bool{false, true} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Begin with a nil context (closed %v) panicked: %v", closed, r)
				}
			}()
			err := Begin(nilCtx, "mystore", "Snapshot", nil, closed)
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "mystore: Snapshot: ") {
				t.Errorf("Begin with a nil context (closed %v) = %v; want ErrInvalid, naming the backend and the call", closed, err)
			}
		}()
	}
}

// CheckSession refuses a session id NewSessionID does not make and a
// malformed member id; BadRecord cuts a long id; SortMalformed orders by
// kind, then id.
func TestReadChecks(t *testing.T) {
	if err := CheckSession(NewSessionID(), "m"); err != nil {
		t.Errorf("CheckSession of a NewSessionID id: %v", err)
	}
	for _, c := range [][2]string{{"S1", "m"}, {NewSessionID(), ""}, {NewSessionID(), "m\x01"}} {
		if CheckSession(c[0], c[1]) == nil {
			t.Errorf("CheckSession(%q, %q) accepted it", c[0], c[1])
		}
	}
	if id := BadRecord(MalformedSession, strings.Repeat("x", MaxIDLength+9), "r").ID; len(id) != MaxIDLength {
		t.Errorf("BadRecord kept an id of %d bytes; want %d", len(id), MaxIDLength)
	}
	ms := []Malformed{{Kind: "b", ID: "1"}, {Kind: "a", ID: "2"}, {Kind: "a", ID: "1"}}
	SortMalformed(ms)
	if want := []Malformed{{Kind: "a", ID: "1"}, {Kind: "a", ID: "2"}, {Kind: "b", ID: "1"}}; !slices.Equal(ms, want) {
		t.Errorf("SortMalformed: %v; want %v", ms, want)
	}
}
