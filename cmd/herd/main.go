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
//	herd --version
//
// Every flag can also be given as an environment variable HERD_<FLAG>
// (HERD_STORE, HERD_LOG_LEVEL); a flag on the command line wins.
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
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
processes through a store they share (Redis, or the in-process store).

Every flag can also be set by an environment variable: HERD_ and the flag's
name in capitals, dashes as underscores (--store is HERD_STORE, --log-level
HERD_LOG_LEVEL). A flag given on the command line wins over its variable;
an empty variable counts as unset. Logs go to stderr; a store URL's password
never appears in them, nor in an error.`,
		Example: `  herd demo                                   # a cluster of members in this process
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
	root.AddCommand(demoCmd(), benchCmd(), groupCmd(), groupsCmd(), statusCmd(), partitionsCmd(), runCmd(), jobsCmd(), checkpointCmd(), childShimCmd())
	markUsageErrors(root)
	return root
}
