package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/herdhq/herd/store"
)

func partitionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "partitions",
		Short: "Show or set a group's partition set",
		Example: `  herd partitions show --group orders       # in the directory of herd run's herd.db
  herd partitions show --store redis://127.0.0.1:6379/0 --group orders
  herd partitions set --store redis://127.0.0.1:6379/0 --group orders 0-63`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(partitionsSetCmd(), partitionsShowCmd())
	return cmd
}

type partitionsOpts struct {
	storeURL   string
	group      string
	allowEmpty bool
	json       bool
	timeout    time.Duration
	readOnly   bool       // show: open the store read-only
	conn       *connector // tests: use this store instead of storeURL's
}

func (o partitionsOpts) validate() (*connector, error) {
	if err := store.ValidateID("group", o.group); err != nil {
		return nil, withExit(exitUsage, fmt.Errorf("--group: %w", err))
	}
	if err := checkDuration("timeout", o.timeout, 100*time.Millisecond, 10*time.Minute); err != nil {
		return nil, withExit(exitUsage, err)
	}
	if o.conn != nil {
		return o.conn, nil
	}
	if o.readOnly {
		return readConnector(o.storeURL)
	}
	return storeConnector(o.storeURL)
}

// addFlags adds the flags set and show share. set changes the group, so
// it needs --store (no default: a typo must not change the wrong store);
// show reads, from the default store unless --store is given.
func (o *partitionsOpts) addFlags(cmd *cobra.Command, changes bool) {
	f := cmd.Flags()
	if changes {
		f.StringVar(&o.storeURL, "store", "", storeFlagUsage+"; required, with no default: this command changes the group")
		_ = cmd.MarkFlagRequired("store")
	} else {
		f.StringVar(&o.storeURL, "store", defaultRunStore, storeFlagUsage)
		o.readOnly = true
	}
	f.StringVar(&o.group, "group", "", "the group (required)")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long connecting and the call may take, 100ms to 10m")
	_ = cmd.MarkFlagRequired("group")
}

func partitionsSetCmd() *cobra.Command {
	o := partitionsOpts{}
	cmd := &cobra.Command{
		Use:   "set --store URL --group G SPEC",
		Short: "Replace a group's partition set; running members follow it",
		Long: `partitions set replaces the group's partition set with SPEC, written as for
herd run --partitions: ids and ranges separated by commas (0-31, a,b,c,
0-3,eu) or @file with one id per line (blank lines and # comments skipped).
At most ` + commas(maxRunPartitions) + ` partitions. Running members follow the new set at once:
partitions removed are stopped (their records and checkpoints are kept until
they return), new ones are placed.

A member started with herd run --partitions writes its own set when it
joins, so a later start with another --partitions replaces this one.

An empty SPEC ("", or a file without ids) removes every partition, which
stops all work of the group: it is refused unless --allow-empty is given.

--store is required (no default): this command changes a group's data.`,
		Example: `  herd partitions set --store redis://127.0.0.1:6379/0 --group orders 0-63
  herd partitions set --store redis://127.0.0.1:6379/0 --group cities @cities.txt
  herd partitions set --store redis://127.0.0.1:6379/0 --group orders --allow-empty ""`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPartitionsSet(cmd.Context(), cmd.OutOrStdout(), o, args[0])
		},
	}
	o.addFlags(cmd, true)
	cmd.Flags().BoolVar(&o.allowEmpty, "allow-empty", false, "allow an empty SPEC, which removes every partition")
	return cmd
}

func runPartitionsSet(ctx context.Context, out io.Writer, o partitionsOpts, spec string) error {
	conn, err := o.validate()
	if err != nil {
		return err
	}
	ps, err := parsePartitionSpec("SPEC", spec)
	if err != nil {
		return withExit(exitUsage, err)
	}
	if len(ps) == 0 && !o.allowEmpty {
		return withExit(exitUsage, fmt.Errorf("SPEC %q holds no partition: that would remove every partition of group %q and stop all its work; pass --allow-empty to mean it", spec, o.group))
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	st, err := conn.connect(ctx)
	if err != nil {
		return connectErr(err, o.storeURL)
	}
	defer st.Close()
	if _, err := st.SetPartitions(ctx, o.group, store.PartitionSet{Partitions: ps}); err != nil {
		return fmt.Errorf("setting the partition set of group %q: %w", o.group, err)
	}
	fmt.Fprintf(out, "group %q: partition set replaced, %s\n", o.group, plural(len(ps), "partition"))
	return nil
}

func partitionsShowCmd() *cobra.Command {
	o := partitionsOpts{}
	cmd := &cobra.Command{
		Use:   "show [--store URL] --group G [--json]",
		Short: "Print a group's partition set as a SPEC that partitions set reads back",
		Long: `partitions show prints the group's partition set as one SPEC (runs of
numbers as ranges, in the order of the ids), which herd partitions set and
herd run --partitions read back as the same set. If an id cannot be written
in a SPEC (it holds a comma, or reads as a range), the ids are printed one
per line instead, as a file for @file. --json prints {"group": G, "stored":
true|false, "partitions": [{"id": ..., "weight": ...}]}. For a group with no
set stored it prints nothing (and says so on stderr); a group the store
does not hold at all is an error (exit status 5).`,
		Example: `  herd partitions show --store redis://127.0.0.1:6379/0 --group orders
  herd partitions show --store redis://127.0.0.1:6379/0 --group orders --json
  herd partitions set --store redis://b:6379 --group orders "$(herd partitions show --store redis://a:6379 --group orders)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPartitionsShow(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	o.addFlags(cmd, false)
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runPartitionsShow(ctx context.Context, out, errOut io.Writer, o partitionsOpts) error {
	conn, err := o.validate()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	st, err := conn.connect(ctx)
	if err != nil {
		return connectErr(err, o.storeURL)
	}
	defer st.Close()
	if err := checkGroupExists(ctx, st, o.group); err != nil {
		return err
	}
	snap, err := st.Snapshot(ctx, o.group)
	if err != nil {
		return fmt.Errorf("reading group %q: %w", o.group, err)
	}
	ps := slices.Clone(snap.Partitions)
	slices.SortFunc(ps, func(a, b store.Partition) int { return compareIDs(a.ID, b.ID) })
	if o.json {
		type part struct {
			ID     string `json:"id"`
			Weight int    `json:"weight"`
		}
		doc := struct {
			Group      string `json:"group"`
			Stored     bool   `json:"stored"`
			Partitions []part `json:"partitions"`
		}{Group: o.group, Stored: snap.PartitionSetStored, Partitions: []part{}}
		for _, p := range ps {
			doc.Partitions = append(doc.Partitions, part{p.ID, p.Weight})
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	if !snap.PartitionSetStored {
		fmt.Fprintf(errOut, "group %q has no partition set stored\n", o.group)
		return nil
	}
	ids := make([]string, len(ps))
	weighted := false
	for i, p := range ps {
		ids[i] = p.ID
		weighted = weighted || p.Weight != 1
	}
	if spec, ok := formatSpec(ids); ok && !weighted {
		_, err = fmt.Fprintln(out, spec)
		return err
	}
	// One id per line, as a file for @file; with its weight after a tab
	// when a partition weighs other than 1.
	for _, p := range ps {
		line := p.ID
		if weighted {
			line += "\t" + strconv.Itoa(p.Weight)
		}
		if _, err := fmt.Fprintln(out, line); err != nil {
			return err
		}
	}
	return nil
}
