package main

import (
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store/sqlitestore"
)

// A --metrics port already in use stops herd run, herd jobs and herd demo
// with a clear error before they write anything to the store: no session
// (a member that joined and exited would show live for its TTL), no
// partition set, no group.
func TestMetricsPortInUseJoinsNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"run", []string{"run", "--group", "g", "--partitions", "0-3", "--ttl", "1m", "--metrics", addr, "--", "sleep", "60"}},
		{"jobs", []string{"jobs", "--group", "g", "--keys", "x,y", "--every", "1m", "--ttl", "1m", "--metrics", addr, "--", "true"}},
		{"demo", []string{"demo", "--metrics", addr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			u := "sqlite://" + filepath.Join(dir, "herd.db")
			m := startHerdIn(t, tc.name, dir, nil, append(tc.args[:1:1], append([]string{"--store", u}, tc.args[1:]...)...)...)
			err := m.wait(t, 30*time.Second)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("herd %s with --metrics on a port in use: %v; want a non-zero exit\n%s", tc.name, err, m.out.String())
			}
			out := m.out.String()
			if !strings.Contains(out, "--metrics "+addr) || !strings.Contains(out, "address already in use") {
				t.Errorf("the error does not name the flag and the cause:\n%s", out)
			}
			if strings.Contains(out, "joined") {
				t.Errorf("herd %s joined before it found the port in use:\n%s", tc.name, out)
			}
			st, err := sqlitestore.Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			groups, err := st.Groups(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(groups) != 0 {
				t.Errorf("groups in the store after the failed start: %v; want none", groups)
			}
			snap, err := st.Snapshot(t.Context(), "g")
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Sessions) != 0 || snap.PartitionSetStored {
				t.Errorf("group g after the failed start: %d sessions, partition set stored %v; want none, false",
					len(snap.Sessions), snap.PartitionSetStored)
			}
		})
	}
}
