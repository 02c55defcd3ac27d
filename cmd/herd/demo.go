package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/herdhq/herd"
)

type demoOpts struct {
	storeURL   string
	partitions int
	ttl        time.Duration
	metrics    string       // --metrics ADDR, "" for none
	log        *slog.Logger // the command's logger (nil: none)
	memberLogs bool         // --log-level given: members log too
	conn       *connector   // tests: use this store instead of storeURL's
}

func demoCmd() *cobra.Command {
	o := demoOpts{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a small cluster in this process and show each rebalance",
		Long: `demo runs members of one group in this process: one member takes all
partitions, the fleet scales to four, one member leaves gracefully, one
crashes (stops without leaving), and a new one joins. After each step it
prints who owns what, how long balancing took and how many partitions
moved against the minimum. At the end, or on Ctrl-C, every member leaves
and the group is deleted from the store.

--partition-count is at most ` + commas(maxPartitions) + `: every partition runs its own handler
goroutine in this one process (see docs/cli.md for the memory this costs).

With --metrics, the members' Prometheus metrics are served on /metrics and
the process's health on /healthz (200 while every member's session is
live). The members log to stderr only if --log-level is given.`,
		Example: `  herd demo
  herd demo --partition-count 1000 --ttl 5s
  herd demo --store redis://127.0.0.1:6379/0?prefix=demo
  herd demo --metrics :9090          # then: curl 127.0.0.1:9090/metrics
  HERD_STORE=redis://:pw@redis:6379 herd demo --log-level info`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("ttl") {
				o.ttl = demoTTL(o.partitions)
			}
			o.log = logger(cmd)
			o.memberLogs = cmd.Flags().Changed("log-level")
			return runDemo(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.storeURL, "store", "mem://", "store URL: mem:// (in-process), sqlite://PATH, redis://host:port or postgres://host/db")
	addPartitionCount(cmd, &o.partitions, 32, "number of partitions (1 to "+commas(maxPartitions)+")")
	cmd.Flags().DurationVar(&o.ttl, "ttl", 0, "session TTL, "+minTTL.String()+" to "+maxTTL.String()+
		" (a crashed member's partitions are taken over after it; default 2s, 10s above "+commas(shortTTLPartitions)+" partitions)")
	cmd.Flags().StringVar(&o.metrics, "metrics", "", metricsFlagUsage)
	return cmd
}

// shortTTLPartitions is the most partitions the demo runs with its short
// default TTL. Members read the whole group up to every TTL/40 while
// partitions move; with a 2 s TTL and more partitions than this, those reads
// keep two cores busy and a graceful leave takes minutes.
const shortTTLPartitions = 10_000

// demoTTL is the demo's default session TTL for p partitions.
func demoTTL(p int) time.Duration {
	if p > shortTTLPartitions {
		return herd.DefaultSessionTTL
	}
	return 2 * time.Second
}

// validate checks every flag of demo.
func (o demoOpts) validate() (*connector, error) {
	if err := checkPartitions(o.partitions); err != nil {
		return nil, err
	}
	if err := checkTTL(o.ttl); err != nil {
		return nil, err
	}
	if o.metrics != "" {
		if _, err := metricsAddr(o.metrics); err != nil {
			return nil, err
		}
	}
	if o.conn != nil {
		return o.conn, nil
	}
	return newConnector(o.storeURL)
}

func runDemo(ctx context.Context, out io.Writer, o demoOpts) (err error) {
	conn, err := o.validate()
	if err != nil {
		return withExit(exitUsage, err) // a flag's value
	}
	log := o.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := herd.Config{SessionTTL: o.ttl}
	if o.memberLogs {
		cfg.Logger = log
	}
	group := fmt.Sprintf("demo-%d", time.Now().UnixNano())
	var reg *prometheus.Registry
	var metricsLn net.Listener
	if o.metrics != "" {
		reg = newMetricsRegistry()
		cfg.Metrics = reg
		// Bound before the group is written: a port in use leaves nothing
		// in the store.
		if metricsLn, err = listenMetrics(ctx, o.metrics); err != nil {
			return err
		}
	}
	c := newCluster(group, o.partitions, cfg, conn.connect)
	defer func() { err = errors.Join(err, c.close()) }()
	if err := c.setup(ctx); err != nil {
		if metricsLn != nil {
			metricsLn.Close()
		}
		return err
	}
	fmt.Fprintf(out, "herd demo: group %s, %d partitions on %s, session TTL %v\n", group, o.partitions, conn.name(), o.ttl)
	if reg != nil {
		// Stopped when ctx ends (Ctrl-C), else before the members leave.
		addr, stop := serveMetricsOn(ctx, metricsLn, reg, c.health, log)
		defer stop()
		fmt.Fprintf(out, "metrics on http://%s/metrics, health on http://%s/healthz\n", addr, addr)
	}
	fmt.Fprintln(out)
	timeout := o.ttl + 10*time.Second + balanceAllowance(o.partitions)
	steps := []struct {
		title  string
		change func() error
	}{
		{"one member joins", func() error { _, err := c.join(1); return err }},
		{"three more join (scale to 4)", func() error { _, err := c.join(3); return err }},
		{"m2 leaves gracefully", func() error { return c.leave("m2") }},
		{"m3 crashes (no leave; its session expires after the TTL)", func() error { return c.crash("m3") }},
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
	fmt.Fprintln(out, "every member leaves gracefully and the group is deleted; done.")
	return nil
}

// health is /healthz's answer during the demo: every running member holds
// a live session.
func (c *cluster) health() error {
	c.mu.Lock()
	ms := make([]*herd.Member, 0, len(c.members))
	for _, r := range c.members {
		ms = append(ms, r.m)
	}
	c.mu.Unlock()
	return membersHealth(ms...)
}
