package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/herdhq/herd/store"
)

func groupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "Manage groups in a store",
		Example: `  herd group delete --store redis://127.0.0.1:6379/0 --group orders
  HERD_STORE=redis://:pw@redis:6379 herd group delete --group orders --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(groupDeleteCmd())
	return cmd
}

type groupDeleteOpts struct {
	storeURL string
	group    string
	force    bool
	timeout  time.Duration
}

func groupDeleteCmd() *cobra.Command {
	o := groupDeleteOpts{}
	cmd := &cobra.Command{
		Use:   "delete --store URL --group G [--force]",
		Short: "Delete a group's data (sessions, partition set, ownerships, checkpoints)",
		Long: `group delete removes everything the store holds for one group, in one
atomic operation. It refuses while a member of the group is alive (its
session has not expired or been closed), unless --force is given. Members
still running when the group is forced away find their sessions gone, as
after a store that lost its data, and write back their partition set and
checkpoints: stop them first. A group the store does not hold is an error
(exit status 5); one with live members, without --force, exit status 6.

--store is required (no default): this command deletes a group's data.`,
		Example: `  herd group delete --store redis://127.0.0.1:6379/0 --group orders
  herd group delete --store redis://127.0.0.1:6379/0?prefix=herd --group orders --force
  HERD_STORE=redis://:pw@redis:6379 HERD_GROUP=orders herd group delete`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGroupDelete(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.storeURL, "store", "", storeFlagUsage+"; required, with no default: this command deletes data")
	cmd.Flags().StringVar(&o.group, "group", "", "the group to delete (required)")
	cmd.Flags().BoolVar(&o.force, "force", false, "delete even if members are alive")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 10*time.Second, "how long connecting and deleting may take, 100ms to 10m")
	_ = cmd.MarkFlagRequired("store")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

// validate checks every flag of group delete.
func (o groupDeleteOpts) validate() (*connector, error) {
	if err := store.ValidateID("group", o.group); err != nil {
		return nil, withExit(exitUsage, fmt.Errorf("--group: %w", err))
	}
	if err := checkDuration("timeout", o.timeout, 100*time.Millisecond, 10*time.Minute); err != nil {
		return nil, withExit(exitUsage, err)
	}
	return storeConnector(o.storeURL)
}

func runGroupDelete(ctx context.Context, out io.Writer, o groupDeleteOpts) error {
	conn, err := o.validate()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	st, err := conn.connect(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := checkGroupExists(ctx, st, o.group); err != nil {
		return fmt.Errorf("%w: nothing deleted", err)
	}
	// The store's own call: its error names the operation and the group
	// once (herd.DeleteGroup would say both again).
	err = st.DeleteGroup(ctx, o.group, o.force)
	if errors.Is(err, store.ErrGroupInUse) {
		return fmt.Errorf("%w; stop its members (or wait for their sessions to expire), or pass --force", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "deleted group %q\n", o.group)
	return nil
}
