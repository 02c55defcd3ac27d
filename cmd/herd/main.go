// Command herd runs, shows, demonstrates and measures herd groups.
//
//	herd demo                     a small cluster in one process, step by step
//	herd bench [--json]           time to balance after scale-out, leave, crash
//	herd group delete             delete a group's data from a store
//	herd --version
package main

import (
	"context"
	"errors"
	"fmt"
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
	if err := newRoot().ExecuteContext(ctx); err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil && os.Getenv("HERD_DEBUG") == "" {
			fmt.Fprintln(os.Stderr, "herd: interrupted")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "herd:", err)
		os.Exit(1)
	}
}

// newRoot builds the command tree (a fresh one per call, for tests).
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "herd",
		Short:         "Spread partitions of work over a changing fleet of processes",
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.AddCommand(demoCmd(), benchCmd(), groupCmd(), runCmd(), checkpointCmd(), childShimCmd())
	return root
}
