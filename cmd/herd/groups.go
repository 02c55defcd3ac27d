package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

type groupsOpts struct {
	storeURL string
	json     bool
	timeout  time.Duration
	conn     *connector // tests: use this store instead of storeURL's
}

func groupsCmd() *cobra.Command {
	o := groupsOpts{}
	cmd := &cobra.Command{
		Use:   "groups [--store URL] [--json]",
		Short: "List the groups in a store",
		Long: `groups lists the groups a store holds anything for (a session, a partition
set, ownership records or a log), one per line, sorted. On Redis it walks the
keys under the store's prefix with SCAN (never KEYS), 1,000 keys per call: a
command for an operator, not for a loop. --json prints {"groups": [...]}.`,
		Example: `  herd groups --store redis://127.0.0.1:6379/0
  herd groups --store 'redis://127.0.0.1:6379/0?prefix=myapp' --json
  HERD_STORE=redis://:pw@redis:6379 herd groups`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGroups(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.storeURL, "store", defaultRunStore, storeFlagUsage)
	f.BoolVar(&o.json, "json", false, `print {"groups": [...]} instead of one group per line`)
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long connecting and listing may take, 100ms to 10m")
	return cmd
}

func runGroups(ctx context.Context, out io.Writer, o groupsOpts) error {
	if err := checkDuration("timeout", o.timeout, 100*time.Millisecond, 10*time.Minute); err != nil {
		return withExit(exitUsage, err)
	}
	conn := o.conn
	if conn == nil {
		var err error
		if conn, err = readConnector(o.storeURL); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	st, err := conn.connect(ctx)
	if err != nil {
		return connectErr(err, o.storeURL)
	}
	defer st.Close()
	gs, err := listGroups(ctx, st)
	if err != nil {
		return err
	}
	if o.json {
		b, err := json.Marshal(struct {
			Groups []string `json:"groups"`
		}{gs})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	for _, g := range gs {
		if _, err := fmt.Fprintln(out, g); err != nil {
			return err
		}
	}
	return nil
}
