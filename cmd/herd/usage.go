package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Usage errors (a bad flag, argument or HERD_* variable, an unknown
// command) exit with exitUsage, whichever part of cobra or of herd finds
// them: markUsageErrors wires that into the command tree once.

// markUsageErrors makes every usage error of root's tree exit with
// exitUsage: flag errors, argument errors, errors of the configuration
// step (HERD_* variables, --log-*) and missing required flags, and
// unknown commands (`herd stauts`, `herd group dlete`), which cobra would
// otherwise answer with the help and status 0 under a command that has
// subcommands.
func markUsageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExit(exitUsage, err) })
	if pre := root.PersistentPreRunE; pre != nil {
		root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
			if err := pre(cmd, args); err != nil {
				return withExit(exitUsage, err)
			}
			// cobra checks these after this hook; checked here, the
			// error is marked (and a HERD_* variable has set its flag).
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return withExit(exitUsage, err)
			}
			return withExit(exitUsage, cmd.ValidateFlagGroups())
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.HasSubCommands() && !c.Runnable():
			c.Args = unknownCommand
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		case c.Args != nil:
			check := c.Args
			c.Args = func(c *cobra.Command, args []string) error { return withExit(exitUsage, check(c, args)) }
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unknownCommand is the argument check of a command that only groups
// others: any argument is a command it does not have.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return withExit(exitUsage, fmt.Errorf("%s (see %s --help)", msg, c.CommandPath()))
}
