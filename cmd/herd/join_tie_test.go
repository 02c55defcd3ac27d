package main

import (
	"strings"
	"testing"
)

// --tie-session: auto ties on SQLite and PostgreSQL, on and off say so, anything else
// is refused.
func TestTieSessionFlag(t *testing.T) {
	for _, tc := range []struct {
		tie, scheme string
		want        bool
	}{
		{"auto", "sqlite", true}, {"auto", "postgres", true}, {"auto", "postgresql", true}, {"auto", "redis", false}, {"auto", "etcd", false},
		{"on", "postgres", true}, {"on", "redis", true}, {"off", "sqlite", false},
	} {
		m := memberFlags{joinTimeout: 1e9, tie: tc.tie}
		if err := m.check(); err != nil {
			t.Errorf("--tie-session %s: %v", tc.tie, err)
		}
		if got := m.tieSession(tc.scheme); got != tc.want {
			t.Errorf("--tie-session %s on %s: ties %v, want %v", tc.tie, tc.scheme, got, tc.want)
		}
	}
	m := memberFlags{joinTimeout: 1e9, tie: "yes"}
	if err := m.check(); err == nil || !strings.Contains(err.Error(), "want auto, on or off") {
		t.Errorf("--tie-session yes: %v; want an error naming the values", err)
	}
}
