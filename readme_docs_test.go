package herd_test

// The README's top commands, the herd commands of the README and docs, and their links.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

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
