package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// What every command shares: the logging flags, HERD_* environment
// variables for every flag, and keeping the store's password out of logs
// and errors. The root command's PersistentPreRunE (configure) does it all
// before a command runs; a subcommand must not set a PersistentPreRunE of
// its own, which cobra would run instead.

// envPrefix starts the environment variable of every flag: --log-level is
// HERD_LOG_LEVEL, --store HERD_STORE.
const envPrefix = "HERD_"

// envAnnotation marks, in a flag's annotations, the variable that set it.
const envAnnotation = "herd_env"

// logFlags are the root command's persistent flags.
type logFlags struct {
	format string
	level  string
}

func addLogFlags(root *cobra.Command) *logFlags {
	f := &logFlags{}
	root.PersistentFlags().StringVar(&f.format, "log-format", "text", "log format: text or json (logs go to stderr)")
	root.PersistentFlags().StringVar(&f.level, "log-level", "info", "least level logged: debug, info, warn or error")
	return f
}

// loggerKey is the context key of the logger configure builds.
type loggerKey struct{}

// defaultLoggerKey in the context given to Execute (main's) makes configure
// install the logger as slog's default too, for the code that logs
// through slog.Default() (the Redis client's messages, members without a
// logger of their own). Tests leave it out, so they share no global.
type defaultLoggerKey struct{}

// logger is the logger configure built for cmd (slog's default outside a
// command's run).
func logger(cmd *cobra.Command) *slog.Logger {
	if ctx := cmd.Context(); ctx != nil {
		if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
			return l
		}
	}
	return slog.Default()
}

// configure runs before every command: it fills the flags not given on the
// command line from HERD_* variables, checks the logging flags and builds
// the command's logger.
func configure(lf *logFlags) func(cmd *cobra.Command, _ []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if err := applyEnv(cmd.Flags()); err != nil {
			return err
		}
		l, err := newLogger(cmd.ErrOrStderr(), lf.format, lf.level, flagName(cmd.Flags(), "log-format"),
			flagName(cmd.Flags(), "log-level"), secretsOf(cmd.Flags(), os.Environ()))
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		if ctx.Value(defaultLoggerKey{}) != nil {
			slog.SetDefault(l)
		}
		cmd.SetContext(context.WithValue(ctx, loggerKey{}, l))
		if l.Enabled(ctx, slog.LevelDebug) {
			l.Debug("configuration", "command", cmd.CommandPath(), slog.Group("flags", flagAttrs(cmd.Flags())...))
		}
		return nil
	}
}

// envName is the environment variable of flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its HERD_*
// variable, if that is set and not empty, as if given: flags win over the
// environment. --help and --version have none. A bad value is reported
// with the variable's name.
func applyEnv(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		// A deprecated spelling has no variable: HERD_PARTITIONS is herd
		// run's set, not demo's old --partitions count.
		if f.Changed || f.Name == "help" || f.Name == "version" || f.Deprecated != "" {
			return
		}
		name := envName(f.Name)
		v := os.Getenv(name)
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s=%q is not a valid --%s: %v", name, v, f.Name, err))
			return
		}
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[envAnnotation] = []string{name}
	})
	return errors.Join(errs...)
}

// flagName names a flag for a message: "--log-level", or
// "HERD_LOG_LEVEL (--log-level)" when the environment set it.
func flagName(fs *pflag.FlagSet, name string) string {
	if f := fs.Lookup(name); f != nil {
		if env := f.Annotations[envAnnotation]; len(env) > 0 {
			return env[0] + " (--" + name + ")"
		}
	}
	return "--" + name
}

// flagAttrs lists every flag's value, and where it came from.
func flagAttrs(fs *pflag.FlagSet) []any {
	var attrs []any
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Name == "version" {
			return
		}
		v := f.Value.String()
		if v == "" {
			v = `""`
		}
		if env := f.Annotations[envAnnotation]; len(env) > 0 {
			v += " (" + env[0] + ")"
		} else if !f.Changed {
			v += " (default)"
		}
		attrs = append(attrs, slog.String(f.Name, v))
	})
	return attrs
}

// newLogger builds the logger of --log-format and --log-level, writing to
// w, which hides secrets wherever they appear in a line.
func newLogger(w io.Writer, format, level, formatFlag, levelFlag string, secrets []string) (*slog.Logger, error) {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "info":
		lv = slog.LevelInfo
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, fmt.Errorf("%s %q is not one of debug, info, warn, error", levelFlag, level)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		return redactAttr(a, secrets)
	}}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("%s %q is not one of text, json", formatFlag, format)
}

// redactAttr hides secrets in a log attribute (the message included):
// strings, errors, and any other value whose text shows one.
func redactAttr(a slog.Attr, secrets []string) slog.Attr {
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		if s := redact(v.String(), secrets); s != v.String() {
			a.Value = slog.StringValue(s)
		}
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		default:
			s = fmt.Sprint(x)
		}
		if r := redact(s, secrets); r != s {
			a.Value = slog.StringValue(r)
		}
	}
	return a
}

// urlPassword matches the password in a URL's user info, for URLs that are
// not among the known values (a secret that came from elsewhere).
var urlPassword = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]*):[^\s@/]+@`)

// redact replaces every secret in s, and any URL's password, by xxxxx.
func redact(s string, secrets []string) string {
	for _, x := range secrets { // longest first: one may contain another
		s = strings.ReplaceAll(s, x, "xxxxx")
	}
	return urlPassword.ReplaceAllString(s, "${1}:xxxxx@")
}

// secretsOf collects the passwords in fs's values and in the environment's
// HERD_* variables (a variable that is not a flag, such as HERD_REDIS_URL,
// may still reach a log).
func secretsOf(fs *pflag.FlagSet, environ []string) []string {
	var values []string
	if fs != nil {
		fs.VisitAll(func(f *pflag.Flag) { values = append(values, f.Value.String()) })
	}
	for _, kv := range environ {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			values = append(values, v)
		}
	}
	return secretsIn(values...)
}

// secretsIn finds the secrets in values: in every URL, the password of its
// user info (the whole user info if it has no colon, as redis://password@,
// except in a postgres:// URL, where it is the user's name), taken up to each '@'
// in turn since a password may hold an unescaped one, and query parameters
// whose name ends in "password" (sentinel_password); each also
// percent-decoded. Longest first.
func secretsIn(values ...string) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if d, err := url.PathUnescape(s); err == nil && d != s {
			out = append(out, d)
		}
		if d, err := url.QueryUnescape(s); err == nil && d != s {
			out = append(out, d)
		}
	}
	for _, v := range values {
		for rest := v; ; {
			i := strings.Index(rest, "://")
			if i < 0 {
				break
			}
			pg := strings.HasSuffix(rest[:i], "postgres") || strings.HasSuffix(rest[:i], "postgresql")
			rest = rest[i+3:]
			end := strings.IndexFunc(rest, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' })
			if end < 0 {
				end = len(rest)
			}
			u := rest[:end]
			for j := range len(u) {
				if u[j] != '@' {
					continue
				}
				info := u[:j]
				if _, pw, ok := strings.Cut(info, ":"); ok {
					add(pw)
				} else if !pg {
					add(info)
				}
			}
			if _, q, ok := strings.Cut(u, "?"); ok {
				for _, kv := range strings.Split(q, "&") {
					if k, val, _ := strings.Cut(kv, "="); strings.HasSuffix(strings.ToLower(k), "password") {
						add(val)
					}
				}
			}
		}
	}
	sortSecrets(out)
	return slices.Compact(out)
}

// sortSecrets sorts secrets longest first (equal ones next to each other).
func sortSecrets(s []string) {
	slices.SortFunc(s, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
}

// errorText is what herd prints for err, the error of cmd (nil if the
// command line did not parse) run with args: without secrets, and saying
// which flags named in it came from the environment.
func errorText(cmd *cobra.Command, err error, args, environ []string) string {
	msg := oncePrefixed(err.Error())
	var fs *pflag.FlagSet
	if cmd != nil {
		fs = cmd.Flags()
		var from []string
		fs.VisitAll(func(f *pflag.Flag) {
			env := f.Annotations[envAnnotation]
			if len(env) > 0 && strings.Contains(msg, "--"+f.Name) && !strings.Contains(msg, env[0]) {
				from = append(from, "--"+f.Name+" was set by "+env[0])
			}
		})
		if len(from) > 0 {
			msg += " (" + strings.Join(from, "; ") + ")"
		}
	}
	secrets := append(secretsOf(fs, environ), secretsIn(args...)...)
	sortSecrets(secrets)
	return redact(msg, secrets)
}

// oncePrefixed drops the "herd: " that the store's sentinel errors (and
// the library's) begin with wherever it repeats in an error's chain:
// herd prints its own "herd: " before the whole message, and each layer
// then says its part once ("sqlitestore: delete group "g": 1 live
// session(s): group has live members").
func oncePrefixed(msg string) string {
	msg = strings.TrimPrefix(msg, "herd: ")
	return strings.ReplaceAll(msg, ": herd: ", ": ")
}
