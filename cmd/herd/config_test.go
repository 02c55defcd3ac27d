package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// executeC runs the herd command line with args and returns its output
// (stdout and stderr), the command that ran, and what herd would print for
// its error ("" if none).
func executeC(t *testing.T, args ...string) (string, *cobra.Command, string) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(t.Context())
	if err == nil {
		return out.String(), cmd, ""
	}
	return out.String(), cmd, errorText(cmd, err, args, os.Environ())
}

// A HERD_* variable sets its flag, a flag on the command line wins over
// it, required flags are satisfied by it, and a bad value or an out-of-range
// one names the variable.
func TestEnvSetsFlags(t *testing.T) {
	t.Setenv("HERD_PARTITION_COUNT", "0")
	_, _, msg := executeC(t, "demo")
	if want := "--partition-count must be between 1 and 125,000 (got 0) (--partition-count was set by HERD_PARTITION_COUNT)"; msg != want {
		t.Errorf("demo with HERD_PARTITION_COUNT=0: %q; want %q", msg, want)
	}

	t.Setenv("HERD_PARTITION_COUNT", "50")
	_, _, msg = executeC(t, "demo", "--partition-count", "-1")
	if want := "--partition-count must be between 1 and 125,000 (got -1)"; msg != want {
		t.Errorf("demo --partition-count -1 with HERD_PARTITION_COUNT=50: %q; want %q (the flag wins)", msg, want)
	}

	t.Setenv("HERD_PARTITION_COUNT", "many")
	_, _, msg = executeC(t, "demo")
	if !strings.Contains(msg, `environment variable HERD_PARTITION_COUNT="many" is not a valid --partition-count`) {
		t.Errorf("demo with HERD_PARTITION_COUNT=many: %q; want an error naming the variable", msg)
	}

	t.Setenv("HERD_PARTITION_COUNT", "")
	t.Setenv("HERD_STORE", "mem://")
	t.Setenv("HERD_GROUP", "g")
	_, _, msg = executeC(t, "group", "delete")
	if !strings.Contains(msg, "--store mem:// is this process's own store") || !strings.Contains(msg, "--store was set by HERD_STORE") {
		t.Errorf("group delete with HERD_STORE and HERD_GROUP: %q; want both required flags taken from the environment", msg)
	}

	t.Setenv("HERD_TIMEOUT", "1ms")
	_, _, msg = executeC(t, "group", "delete", "--store", "redis://127.0.0.1:1")
	if want := "--timeout must be between 100ms and 10m0s (got 1ms) (--timeout was set by HERD_TIMEOUT)"; msg != want {
		t.Errorf("group delete with HERD_TIMEOUT=1ms: %q; want %q", msg, want)
	}
}

// --log-level and --log-format are checked, from flags and environment
// alike, and shape the command's logs.
func TestLogFlags(t *testing.T) {
	for _, tc := range []struct {
		env, args []string
		want      string
	}{
		{nil, []string{"demo", "--log-level", "verbose"}, `--log-level "verbose" is not one of debug, info, warn, error`},
		{nil, []string{"demo", "--log-format", "xml"}, `--log-format "xml" is not one of text, json`},
		{[]string{"HERD_LOG_LEVEL", "loud"}, []string{"demo"}, `HERD_LOG_LEVEL (--log-level) "loud" is not one of debug, info, warn, error`},
		{[]string{"HERD_LOG_FORMAT", "yaml"}, []string{"bench"}, `HERD_LOG_FORMAT (--log-format) "yaml" is not one of text, json`},
	} {
		if tc.env != nil {
			t.Setenv(tc.env[0], tc.env[1])
		}
		if _, _, msg := executeC(t, tc.args...); msg != tc.want {
			t.Errorf("herd %q (env %q): %q; want %q", tc.args, tc.env, msg, tc.want)
		}
		if tc.env != nil {
			t.Setenv(tc.env[0], "")
		}
	}

	// The configuration is logged at DEBUG: in JSON, one object per line.
	args := []string{"group", "delete", "--store", "mem://", "--group", "g", "--log-level", "debug", "--log-format", "json"}
	out, _, _ := executeC(t, args...)
	var line struct {
		Level, Msg string
		Flags      map[string]string
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &line); err != nil || line.Level != "DEBUG" || line.Msg != "configuration" ||
		line.Flags["group"] != "g" || line.Flags["log-format"] != "json" {
		t.Errorf("herd %q logged %q (%v); want one JSON line of the configuration at DEBUG", args, out, err)
	}
	out, _, _ = executeC(t, "group", "delete", "--store", "mem://", "--group", "g", "--log-level", "debug")
	if !strings.HasPrefix(out, "time=") || !strings.Contains(out, "level=DEBUG msg=configuration") || !strings.Contains(out, `flags.group=g`) {
		t.Errorf("text log at debug: %q", out)
	}
	t.Setenv("HERD_LOG_LEVEL", "DEBUG")
	out, _, _ = executeC(t, "group", "delete", "--store", "mem://", "--group", "g", "--log-level", "info")
	if out != "" {
		t.Errorf("--log-level info (HERD_LOG_LEVEL=DEBUG) logged %q; want nothing at debug", out)
	}
}

// A store password given by flag or by environment, plain or
// percent-encoded, appears in no log line (text or JSON, at DEBUG), in no
// error, and in no help; nor does it when given to the wrong flag.
func TestPasswordNeverShown(t *testing.T) {
	const pw = "s3cr3t-Pa55"
	for _, format := range []string{"text", "json"} {
		for _, tc := range []struct {
			env  string // HERD_STORE
			args []string
		}{
			{"", []string{"demo", "--store", "redis://u:" + pw + "@127.0.0.1:1/0"}},
			{"redis://:" + pw + "@127.0.0.1:1/0", []string{"demo"}},
			{"redis://u:" + pw + "@127.0.0.1:1/0?prefix=x", []string{"group", "delete", "--group", "g", "--timeout", "200ms"}},
			{"", []string{"group", "delete", "--group", "g", "--store", "redis://u:" + pw + "%40x@127.0.0.1:1/0"}},
			{"", []string{"group", "delete", "--group", "g", "--store", "redis+sentinel://127.0.0.1:1/m?sentinel_password=" + pw}},
			{"", []string{"demo", "--ttl", "redis://u:" + pw + "@h"}},
			{"", []string{"status", "--store", "redis://u:" + pw + "@127.0.0.1:1/0", "--timeout", "200ms"}},
			{"redis://:" + pw + "@127.0.0.1:1/0", []string{"status", "--group", "g", "--json", "--timeout", "200ms"}},
			{"redis://u:" + pw + "@127.0.0.1:1/0", []string{"groups", "--timeout", "200ms"}},
			{"redis://u:" + pw + "@127.0.0.1:1/0", []string{"partitions", "set", "--group", "g", "--timeout", "200ms", "0-3"}},
			{"", []string{"partitions", "show", "--group", "g", "--store", "redis://u:" + pw + "%40x@127.0.0.1:1/0", "--timeout", "200ms"}},
			{"redis://u:" + pw + "@127.0.0.1:1/0", []string{"demo", "--help"}},
			{"redis://u:" + pw + "@127.0.0.1:1/0", []string{"--help"}},
		} {
			t.Setenv("HERD_STORE", tc.env)
			args := append(tc.args, "--log-level", "debug", "--log-format", format)
			out, _, msg := executeC(t, args...)
			if strings.Contains(out, pw) || strings.Contains(out, pw+"@x") || strings.Contains(msg, pw) {
				t.Errorf("herd %q (HERD_STORE %q) shows the password:\noutput: %s\nerror: %s", args, tc.env, out, msg)
			}
			if !strings.Contains(tc.args[len(tc.args)-1], "help") && msg == "" {
				t.Errorf("herd %q: no error; want one (the store is unreachable)", args)
			}
		}
	}
}

func TestRedact(t *testing.T) {
	secrets := secretsIn("redis://user:p@ss@host:6379/0", "rediss+cluster://:tok%2Fen@a:1,b:2", "x", "redis://alone@h")
	for _, tc := range []struct{ in, want string }{
		{"connecting to redis://user:p@ss@host:6379/0 failed", "connecting to redis://user:xxxxx@host:6379/0 failed"},
		{"auth p@ss rejected", "auth xxxxx rejected"},
		{"token tok/en and tok%2Fen", "token xxxxx and xxxxx"},
		{"redis://alone@h", "redis://xxxxx@h"},
		{"other redis://bob:hunter2@db:6379", "other redis://bob:xxxxx@db:6379"},
		{"nothing to hide", "nothing to hide"},
	} {
		if got := redact(tc.in, secrets); got != tc.want {
			t.Errorf("redact(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
	// A postgres:// user without a password is a name, not a secret.
	pg := secretsIn("postgres://postgres@db/test", "postgresql://ann:s3cret@db/test")
	for _, tc := range []struct{ in, want string }{
		{"store postgres://postgres@db/test", "store postgres://postgres@db/test"},
		{"store postgresql://ann:s3cret@db/test", "store postgresql://ann:xxxxx@db/test"},
	} {
		if got := redact(tc.in, pg); got != tc.want {
			t.Errorf("redact(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// Every command's help has examples (cobra's own help and completion
// commands and hidden ones aside).
func TestHelpHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" || c.Hidden {
			return
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no examples", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	out, _, _ := executeC(t, "demo", "--help")
	if !strings.Contains(out, "Examples:\n  herd demo") || !strings.Contains(out, "--metrics") || !strings.Contains(out, "--log-level") {
		t.Errorf("herd demo --help:\n%s\nwant examples, --metrics and --log-level", out)
	}
}
