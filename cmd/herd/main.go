// Command herd runs, shows, demonstrates and measures herd groups.
//
//	herd demo                     a small cluster in one process, step by step
//	herd bench [--json]           time to balance after scale-out, leave, crash
//	herd status                   members, partitions, owners, checkpoints of a store's groups
//	herd groups                   list the groups in a store
//	herd partitions set|show      replace or print a group's partition set
//	herd group delete             delete a group's data from a store
//	herd run                      run a child process per owned partition
//	herd jobs                     run a child process per owned key per interval
//	herd dashboard                a live web page of a store's groups and partitions
//	herd version                  the version (also herd --version)
//
// Every flag can also be given as an environment variable HERD_<FLAG>
// (HERD_STORE, HERD_LOG_LEVEL); a flag on the command line wins.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal the command cleans up (members leave, the
	// group is deleted) within a few seconds; a second signal ends the
	// process at once.
	context.AfterFunc(ctx, stop)
	cmd, err := newRoot().ExecuteContextC(context.WithValue(ctx, defaultLoggerKey{}, true))
	if err != nil {
		code, text := exitCode(err), errorText(cmd, err, os.Args[1:], os.Environ())
		if errors.Is(err, context.Canceled) && ctx.Err() != nil && os.Getenv("HERD_DEBUG") == "" {
			code, text = exitInterrupted, "interrupted"
		}
		writeFinalError(os.Stderr, jsonLogs(cmd, os.Environ()), text, code)
		os.Exit(code)
	}
}

// newRoot builds the command tree (a fresh one per call, for tests).
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "herd",
		Short: "Spread partitions of work over a changing fleet of processes",
		Long: `herd spreads the partitions of a piece of work over a changing fleet of
processes through a store they share: an SQLite file (the processes of one
host), PostgreSQL or Redis.

Every flag can also be set by an environment variable: HERD_ and the flag's
name in capitals, dashes as underscores (--store is HERD_STORE, --log-level
HERD_LOG_LEVEL). A flag given on the command line wins over its variable;
an empty variable counts as unset. Logs go to stderr; a store URL's password
never appears in them, nor in an error.

` + storeURLsHelp,
		Example: `  herd run --group orders --partitions 0-31 -- ./consumer {partition}
  herd status                                 # the groups of ./herd.db, herd run's default store
  herd demo                                   # a cluster of members in this process
  herd demo --store redis://127.0.0.1:6379/0 --metrics :9090
  herd bench --json --scenario crash
  herd status --store redis://127.0.0.1:6379/0 --group orders --watch
  HERD_STORE=redis://:pw@redis:6379 herd group delete --group orders
  herd demo --log-level debug --log-format json`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.PersistentPreRunE = configure(addLogFlags(root))
	root.AddCommand(demoCmd(), benchCmd(), groupCmd(), groupsCmd(), statusCmd(), partitionsCmd(), runCmd(), jobsCmd(), dashboardCmd(), checkpointCmd(), childShimCmd(), benchMemberCmd(), versionCmd())
	forEachCommand(root, func(c *cobra.Command) {
		if c.Flags().Lookup("store") != nil {
			c.Long = strings.TrimRight(c.Long, "\n") + "\n\n" + storeURLsHelp
		}
		addOutputFlag(c)
	})
	markUsageErrors(root)
	return root
}

// forEachCommand calls f for cmd's subcommands, and theirs.
func forEachCommand(cmd *cobra.Command, f func(*cobra.Command)) {
	for _, c := range cmd.Commands() {
		f(c)
		forEachCommand(c, f)
	}
}

// versionCmd is herd version, the same as herd --version.
func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print herd's version (the same as herd --version)",
		Example: "  herd version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "herd %s\n", version())
			return err
		},
	}
}

// outputFlag is -o/--output text|json, another spelling of --json.
type outputFlag struct{ json *pflag.Flag }

func (o outputFlag) String() string {
	if o.json.Value.String() == "true" {
		return "json"
	}
	return "text"
}

func (o outputFlag) Set(v string) error {
	switch v {
	case "json":
		return o.json.Value.Set("true")
	case "text":
		return o.json.Value.Set("false")
	}
	return fmt.Errorf("%q is not one of text, json", v)
}

func (outputFlag) Type() string { return "format" }

// addOutputFlag gives a command with --json the flag -o/--output.
func addOutputFlag(c *cobra.Command) {
	j := c.Flags().Lookup("json")
	if j == nil || c.Flags().Lookup("output") != nil {
		return
	}
	c.Flags().VarP(outputFlag{j}, "output", "o", "output format: text, or json (the same as --json)")
}
