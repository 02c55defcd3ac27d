//go:build unix

package sqlitestore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
	"github.com/herdhq/herd/store/storetest"
)

// envTieChild, in a child process (TestTieChild), is the database file
// the child ties a session in.
const envTieChild = "HERD_SQLITE_TIE_CHILD"

// TestTieChild is the child process of TestTieProcessKilled: it ties a
// session of group g, prints its id and waits for its stdin to end. It
// does nothing in a normal test run.
func TestTieChild(t *testing.T) {
	path := os.Getenv(envTieChild)
	if path == "" {
		return
	}
	s, err := sqlitestore.Open(context.Background(), "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.OpenSession(t.Context(), "g", "child", 1, tieTTL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TieSession(t.Context(), "g", id, store.TieConfig{TTL: tieTTL, Grace: tieGrace}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("tied", id)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent kills us or goes
	os.Exit(0)
}

// A process killed with kill -9 while it holds a tied session: the
// kernel releases its lock, the tie of another process that watches it
// sees that at once, and the session ends after the grace, well before
// its TTL.
func TestTieProcessKilled(t *testing.T) {
	if os.Getenv(envTieChild) != "" {
		t.Skip("in a child process")
	}
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	s := open(t, path)
	tied(ctx, t, s, "g", "watcher")
	cmd := exec.Command(os.Args[0], "-test.run=^TestTieChild$")
	cmd.Env = append(os.Environ(), envTieChild+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	var id string
	for id == "" && sc.Scan() {
		id, _ = strings.CutPrefix(sc.Text(), "tied ")
	}
	if id == "" {
		t.Fatalf("the child did not tie a session: %v", sc.Err())
	}
	v := storetest.Version(ctx, t, s, "g")
	at := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	d := storetest.WaitExpired(ctx, t, s, "g", v, id, 5*time.Second).Sub(at)
	t.Logf("the killed process's session ended %v after kill -9 (grace %v, TTL %v)", d.Round(time.Millisecond), tieGrace, tieTTL)
	if d < tieGrace || d > tieGrace+time.Second {
		t.Errorf("the killed process's session ended %v after kill -9; want between the grace %v and a second more", d, tieGrace)
	}
}
