package herd_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/redisstore"
)

// exampleRegion returns the text between the // README:begin and
// // README:end lines of an example file.
func exampleRegion(t *testing.T, path string) string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(src), "// README:begin\n")
	region, _, ok2 := strings.Cut(rest, "// README:end\n")
	if !ok || !ok2 {
		t.Fatalf("%s has no README:begin / README:end region", path)
	}
	return region
}

// The README's library snippet is, byte for byte, the marked region of
// examples/consumer/main.go, which builds and runs (below).
func TestReadmeSnippetIsExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Using the library\n")
	if !ok {
		t.Fatal(`README.md has no "## Using the library" section`)
	}
	_, block, ok := strings.Cut(section, "```go\n")
	block, _, ok2 := strings.Cut(block, "```\n")
	if !ok || !ok2 {
		t.Fatal(`README.md's "Using the library" section has no go block`)
	}
	if want := exampleRegion(t, "examples/consumer/main.go"); block != want {
		t.Fatalf("README.md's snippet differs from the README region of examples/consumer/main.go; copy it over.\nREADME:\n%s\nexample:\n%s", block, want)
	}
}

// goTool returns the go command, or skips the test.
func goTool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go tool is not on PATH (%v): cannot build the examples in a module of their own", err)
	}
	return path
}

// A module outside the repository, as a user would write one, builds the
// examples against herd by its module path (a replace directive points at
// this checkout, as for any unpublished module), vets them, and runs them:
// the fencing example on the in-process store, the README's consumer on
// Redis, where SIGTERM must mean a graceful leave that writes the last
// marked position of every partition. Offline: only the module cache is
// used.
func TestReadmeExamplesBuildInOwnModule(t *testing.T) {
	goCmd := goTool(t)
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(gomod)
	dir := t.TempDir()
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", fmt.Appendf(nil, "module example.com/herduser\n\n%s\n\nrequire github.com/herdhq/herd v0.0.0\n\nreplace github.com/herdhq/herd => %s\n", goLine, root))
	sum, err := os.ReadFile("go.sum") // herd's dependencies' sums: nothing to look up
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", sum)
	for _, ex := range []string{"consumer", "fencing"} {
		files, err := filepath.Glob(filepath.Join("examples", ex, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("examples/%s: %v %v", ex, files, err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			write(filepath.Join(ex, filepath.Base(f)), data)
		}
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goCmd, args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in a module of its own: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("build", "-o", filepath.Join(dir, "bin")+string(filepath.Separator), "./...")
	run("vet", "./...")

	t.Run("fencing", func(t *testing.T) {
		out, err := exec.Command(filepath.Join(dir, "bin", "fencing")).Output()
		if err != nil {
			t.Fatalf("fencing: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "late write to the partition it lost was refused") {
			t.Fatalf("fencing printed:\n%s", out)
		}
	})
	t.Run("consumer", func(t *testing.T) {
		raw := redistest.Need(t)
		prefix := redistest.Prefix(t, raw, "herd-example-test")
		const entries = 40
		cmd := exec.Command(filepath.Join(dir, "bin", "consumer"), "-redis", redistest.URL(), "-prefix", prefix, "-produce", strconv.Itoa(entries))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
			exited <- cmd.Wait()
		}()
		deadline := time.After(30 * time.Second)
		for seen := 0; seen < entries; {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("consumer ended after %d entries: %v\n%s", seen, <-exited, stderr.String())
				}
				if strings.HasPrefix(l, "partition ") {
					seen++
				}
			case <-deadline:
				_ = cmd.Process.Kill()
				t.Fatalf("consumer printed %d of %d entries in 30 s\n%s", seen, entries, stderr.String())
			}
		}
		sent := time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		for range lines {
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("consumer after SIGTERM: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("consumer still running 30 s after SIGTERM\n%s", stderr.String())
		}
		took := time.Since(sent)
		if !strings.Contains(stderr.String(), "left the group") {
			t.Fatalf("consumer did not leave the group:\n%s", stderr.String())
		}
		// Every partition's stored checkpoint is its stream's last entry.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := redisstore.Open(ctx, redistest.URL(), redisstore.WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		snap, err := st.Snapshot(ctx, "events")
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Owners) != 8 {
			t.Fatalf("%d ownership records, want 8", len(snap.Owners))
		}
		// Snapshots carry no checkpoints: a session of the test's own claims
		// each released partition to read it, as a successor would.
		reader, err := st.OpenSession(ctx, "events", "checkpoint-reader", 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range snap.Owners {
			last, err := raw.XRevRangeN(ctx, prefix+":events:"+o.Partition, "+", "-", 1).Result()
			if err != nil || len(last) != 1 {
				t.Fatal(errors.Join(err, fmt.Errorf("stream of partition %s: %v", o.Partition, last)))
			}
			if o.Session != "" {
				t.Errorf("partition %s: still owned by session %q after SIGTERM; want it released", o.Partition, o.Session)
				continue
			}
			c, err := store.Claim(ctx, st, "events", o.Partition, reader)
			if err != nil {
				t.Fatalf("claim of released partition %s: %v", o.Partition, err)
			}
			if string(c.Checkpoint) != last[0].ID {
				t.Errorf("partition %s: checkpoint %q after SIGTERM; want %q (the last entry)", o.Partition, c.Checkpoint, last[0].ID)
			}
		}
		t.Logf("consumer: %d entries printed, exited %v after SIGTERM, every partition released at its last entry", entries, took.Round(time.Millisecond))
	})
}
