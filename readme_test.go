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

// The two commands at the top of the README are the ones that work: the
// demo is a command of ./cmd/herd, and the test command is the one CI runs.
func TestReadmeTopCommands(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```sh\n")
	block, _, ok2 := strings.Cut(block, "```\n")
	if !ok || !ok2 {
		t.Fatal("README.md has no sh block at the top")
	}
	var cmds []string
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		cmds = append(cmds, strings.TrimSpace(cmd))
	}
	want := []string{"go run ./cmd/herd demo", "go test -race ./..."}
	if strings.Join(cmds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("README.md's first commands are %q; want %q (update this test with them)", cmds, want)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), want[1]) {
		t.Errorf(".ci/run does not run %q, the README's test command", want[1])
	}
	herd := buildHerd(t)
	if out, err := exec.Command(herd, "demo", "--help").CombinedOutput(); err != nil {
		t.Fatalf("herd demo --help: %v\n%s", err, out)
	}
}

// buildHerd builds ./cmd/herd into a temporary directory.
func buildHerd(t *testing.T) string {
	t.Helper()
	goCmd := goTool(t)
	bin := filepath.Join(t.TempDir(), "herd")
	if out, err := exec.Command(goCmd, "build", "-o", bin, "./cmd/herd").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/herd: %v\n%s", err, out)
	}
	return bin
}

// docFiles returns README.md and every page of docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, pages...)
}

var inlineHerd = regexp.MustCompile("`(herd [^`]+)`")

// herdCommands returns the herd command lines of a markdown text: the lines
// of its code blocks that start with herd (continuation lines joined), and
// its inline code spans that do.
func herdCommands(text string) []string {
	var cmds []string
	inCode := false
	last := -1 // index in cmds of the code block's last herd line
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode, last = !inCode, -1
			continue
		}
		if !inCode {
			for _, m := range inlineHerd.FindAllStringSubmatch(line, -1) {
				cmds = append(cmds, m[1])
			}
			continue
		}
		trimmed := strings.TrimPrefix(strings.TrimSpace(line), "$ ")
		switch {
		case strings.HasPrefix(trimmed, "herd "):
			cmds = append(cmds, trimmed)
			last = len(cmds) - 1
		case last >= 0 && line != trimmed && (strings.HasPrefix(trimmed, "[") || strings.HasPrefix(trimmed, "--")):
			cmds[last] += " " + trimmed // a synopsis or a \ continuation
		default:
			last = -1
		}
	}
	return cmds
}

var (
	commandWord = regexp.MustCompile(`^[a-z]+$`)
	flagName    = regexp.MustCompile(`(?:^|[\s\[(|])(--[a-z][a-z0-9-]*)`)
)

// Every herd command the README and the docs show names a real command,
// and every flag they give it is one of its flags (its --help lists it).
func TestReadmeAndDocsHerdCommands(t *testing.T) {
	herd := buildHerd(t)
	helps := map[string]string{}
	help := func(words []string) string {
		key := strings.Join(words, " ")
		if h, ok := helps[key]; ok {
			return h
		}
		out, err := exec.Command(herd, append(words, "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("herd %s --help: %v\n%s", key, err, out)
		}
		helps[key] = string(out)
		return helps[key]
	}
	checked := 0
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range herdCommands(string(text)) {
			if cmd == "herd stauts" {
				continue // operators.md's example of a misspelt command (exit status 2)
			}
			args, _, _ := strings.Cut(cmd, " -- ") // the child's command
			args, _, _ = strings.Cut(args, " #")   // a shell comment
			fields := strings.Fields(args)[1:]
			var words []string
			for _, f := range fields {
				if len(words) == 2 || !commandWord.MatchString(f) {
					break
				}
				words = append(words, f)
			}
			if len(words) > 0 && !strings.Contains(help(nil), "  "+words[0]+" ") {
				t.Errorf("%s: %q: herd has no command %q", file, cmd, words[0])
				continue
			}
			h := help(words)
			for _, m := range flagName.FindAllStringSubmatch(args, -1) {
				if !strings.Contains(h, m[1]+" ") && !strings.Contains(h, m[1]+"\n") && !strings.Contains(h, m[1]+",") {
					t.Errorf("%s: %q: %s is not a flag of herd %s", file, cmd, m[1], strings.Join(words, " "))
				}
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d herd commands in the docs; the parser lost them", checked)
	}
	t.Logf("%d herd commands checked", checked)
}

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	notSlug  = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	fenceTag = "```"
)

// anchors returns the anchors GitHub makes for a markdown file's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), fenceTag) {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.ReplaceAll(notSlug.ReplaceAllString(strings.ToLower(title), ""), " ", "-")
		for i, s := 0, slug; ; i++ {
			if !out[s] {
				out[s] = true
				break
			}
			s = slug + "-" + strconv.Itoa(i+1)
		}
	}
	return out
}

// Every relative link of the README and the docs names a file that exists,
// and an anchor that its headings make.
func TestReadmeAndDocsLinks(t *testing.T) {
	links := 0
	defer func() { t.Logf("%d relative links checked", links) }()
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			path, anchor, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.Join(filepath.Dir(file), path)
			}
			data, err := os.ReadFile(resolved)
			if err != nil {
				if fi, serr := os.Stat(resolved); serr == nil && fi.IsDir() && anchor == "" {
					continue
				}
				t.Errorf("%s: link %s: %v", file, target, err)
				continue
			}
			if anchor != "" && !anchors(string(data))[anchor] {
				t.Errorf("%s: link %s: %s has no heading with anchor #%s", file, target, resolved, anchor)
			}
		}
	}
}
