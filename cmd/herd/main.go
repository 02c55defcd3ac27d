// Command herd runs, shows, demonstrates and measures herd groups.
//
//	herd demo                     a small cluster in one process, step by step
//	herd bench [--json]           time to balance after scale-out, leave, crash
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
	root := &cobra.Command{
		Use:           "herd",
		Short:         "Spread partitions of work over a changing fleet of processes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(demoCmd(), benchCmd())
	if err := root.ExecuteContext(ctx); err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil && os.Getenv("HERD_DEBUG") == "" {
			fmt.Fprintln(os.Stderr, "herd: interrupted")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "herd:", err)
		os.Exit(1)
	}
}
