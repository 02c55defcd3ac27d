package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/herdhq/herd"
)

func demoCmd() *cobra.Command {
	var storeURL string
	var partitions int
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a small cluster in this process and show each rebalance",
		Long: `demo runs members of one group in this process: one member takes all
partitions, the fleet scales to four, one member leaves gracefully, one
crashes (stops without leaving), and a new one joins. After each step it
prints who owns what, how long balancing took and how many partitions
moved against the minimum.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), storeURL, partitions, ttl)
		},
	}
	cmd.Flags().StringVar(&storeURL, "store", "mem://", "store URL: mem:// (in-process) or redis://host:port")
	cmd.Flags().IntVar(&partitions, "partitions", 32, "number of partitions")
	cmd.Flags().DurationVar(&ttl, "ttl", 2*time.Second, "session TTL (a crashed member's partitions are taken over after it)")
	return cmd
}

func runDemo(ctx context.Context, out io.Writer, storeURL string, partitions int, ttl time.Duration) error {
	if partitions < 1 {
		return fmt.Errorf("--partitions must be at least 1, got %d", partitions)
	}
	conn, err := newConnector(storeURL)
	if err != nil {
		return err
	}
	cfg := herd.Config{SessionTTL: ttl}
	if err := (herd.Config{Group: "demo", Handler: func(*herd.Claim) error { return nil }, SessionTTL: ttl}).Validate(); err != nil {
		return err
	}
	group := fmt.Sprintf("demo-%d", time.Now().UnixNano())
	c := newCluster(ctx, group, partitions, cfg, conn.connect)
	if err := c.setup(ctx); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.stopAll(sctx)
	}()
	fmt.Fprintf(out, "herd demo: %d partitions on %s, session TTL %v\n\n", partitions, conn.name(), ttl)
	timeout := ttl + 10*time.Second
	var crashed string
	steps := []struct {
		title  string
		change func() error
	}{
		{"one member joins", func() error { _, err := c.join(1); return err }},
		{"three more join (scale to 4)", func() error { _, err := c.join(3); return err }},
		{"m2 leaves gracefully", func() error { return c.leave(ctx, "m2") }},
		{"m3 crashes (no leave; its session expires after the TTL)", func() error { crashed = "m3"; return c.crash("m3") }},
		{"a new member joins", func() error { _, err := c.join(1); return err }},
	}
	for i, s := range steps {
		res, err := c.measure(ctx, timeout, s.change)
		if err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, s.title, err)
		}
		fmt.Fprintf(out, "step %d: %s\n", i+1, s.title)
		fmt.Fprint(out, c.tr.Table(c.live()))
		fmt.Fprintf(out, "  balanced in %v; %d partitions moved, minimum %d; at most %d handler(s) per partition at once\n\n",
			res.Elapsed.Round(100*time.Microsecond), res.Moves, res.MinMoves, res.MaxConcurrent)
	}
	_ = crashed
	fmt.Fprintln(out, "every member leaves gracefully; done.")
	return nil
}
