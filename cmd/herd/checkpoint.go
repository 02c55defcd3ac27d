package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/herdhq/herd/internal/checkpointsock"
)

type checkpointOpts struct {
	base64  bool
	timeout time.Duration
}

// exitFenced ends the process with status 3 when a checkpoint is fenced
// (a variable for tests).
var exitFenced = func() { os.Exit(exitCheckpoint) }

func checkpointCmd() *cobra.Command {
	o := checkpointOpts{}
	cmd := &cobra.Command{
		Use:   "checkpoint [--base64] VALUE",
		Short: "Save the partition's checkpoint, from a child of herd run",
		Example: `  # in a child of herd run: save a position, and stop if the partition moved
  herd checkpoint "$offset" || { [ $? -eq 3 ] && exit 0; }

  # binary progress
  printf '\x00\x01' | base64 | xargs herd checkpoint --base64`,
		Long: `checkpoint saves VALUE as the checkpoint of the partition a child of herd run
is running (it reads HERD_SOCKET, HERD_PARTITION and HERD_EPOCH from the
environment herd run gave the child). The save is fenced by the epoch: once
the partition has been handed off or lost, nothing is written.

Exit status: 0 saved; 3 fenced (the partition has moved on: the child should
stop; the message gives the current epoch, 0 if unknown); 1 any other error
(nothing saved; trying again may work).

VALUE is taken as it is written; with --base64 it is standard base64, for
binary values: herd checkpoint --base64 "$(printf '\001\002' | base64 -w0)".
The new child of a partition finds it in HERD_CHECKPOINT (text) and
HERD_CHECKPOINT_BASE64.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCheckpoint(cmd.Context(), cmd.ErrOrStderr(), o, args[0])
		},
	}
	cmd.Flags().BoolVar(&o.base64, "base64", false, "VALUE is standard base64 (for binary values)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 30*time.Second, "how long the save may take, 100ms to 10m")
	return cmd
}

func runCheckpoint(ctx context.Context, errOut io.Writer, o checkpointOpts, arg string) error {
	if err := checkDuration("timeout", o.timeout, 100*time.Millisecond, 10*time.Minute); err != nil {
		return err
	}
	value := []byte(arg)
	if o.base64 {
		var err error
		if value, err = base64.StdEncoding.DecodeString(arg); err != nil {
			return errors.New("checkpoint: --base64: VALUE is not standard base64 (with padding)")
		}
	}
	if len(value) > checkpointsock.MaxValue {
		return fmt.Errorf("checkpoint: VALUE is %d bytes, over the limit of %d", len(value), checkpointsock.MaxValue)
	}
	sock, part, epochS := os.Getenv(checkpointsock.EnvSocket), os.Getenv(checkpointsock.EnvPartition), os.Getenv(checkpointsock.EnvEpoch)
	if sock == "" || part == "" || epochS == "" {
		return errors.New("checkpoint: HERD_SOCKET, HERD_PARTITION or HERD_EPOCH is not set: herd checkpoint runs inside a child of herd run")
	}
	epoch, err := strconv.ParseUint(epochS, 10, 64)
	if err != nil {
		return fmt.Errorf("checkpoint: HERD_EPOCH %q is not a number", epochS)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := checkpointsock.Checkpoint(ctx, sock, part, epoch, value)
	switch {
	case err != nil:
		return err
	case rep.Fenced:
		fmt.Fprintf(errOut, "herd: checkpoint of partition %q at epoch %d fenced: the partition has moved on (current epoch %d); nothing saved\n", part, epoch, rep.Current)
		exitFenced()
		return errors.New("checkpoint: fenced")
	case rep.Err != nil:
		return fmt.Errorf("checkpoint: not saved: %w", rep.Err)
	}
	return nil
}
