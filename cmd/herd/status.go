package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herdhq/herd/store"
)

type statusOpts struct {
	storeURL string
	group    string
	watch    bool
	interval time.Duration
	json     bool
	all      bool
	jobs     bool
	limit    int
	color    string
	timeout  time.Duration
	conn     *connector // tests: use this store instead of storeURL's

	check bool          // --check: exit exitUnhealthy unless every partition runs (statuscheck.go)
	grace time.Duration // --check's grace; 0: estimated
}

// maxStatusLimit bounds --limit.
const maxStatusLimit = 100_000

const statusLong = `status shows what a store's groups are doing: the live members (one line
per session: member id, session, weight, time left on its TTL, partitions
owned), and the partitions with their state, owner, epoch, how long ago the
record got its epoch, checkpoint size and age, and for those nobody runs, why:

  running     owned by a live member
  released    released by its owner (a handoff, a member that left):
              waiting for a claim
  unowned     never claimed, or its owner's session is gone (expired or
              closed): waiting for a claim
  malformed   its record cannot be decoded: no member claims it until it is
              repaired or deleted

"no live member" is added when the group has none. A partition stays
released or unowned only briefly while members are live: if it stays so, the
members' logs say why.

The member id is what the member joined with: herd run uses <hostname>-<pid>
unless --member is given, so the host is in it.

Without --group every group of the store is shown (the store must be able
to list its groups: Redis can). A group of at most --limit partitions lists
all of them; a larger one lists only those not running, at most --limit,
and counts the rest; --all lists every partition (and the records of
partitions removed from the set).

A jobs group (herd jobs, package jobs) is shown as its blackboard: instead
of the partitions, one line per key: the member that owns
it, whether a run is under way and since when, the last start and stop, the
last result (ok, interrupted, or the error, cut), when the next run is due,
the slots missed and the runs ended. A record that is not a job record shows
as unreadable, with the reason under the table. --limit and --all apply to
keys as to partitions: a larger group lists only the keys that need a look
(unreadable record, no owner, a run stopped mid-way, a last run that failed
or was interrupted). --jobs shows a group whose kind is not known (written
by an older herd) this way too; a group of herd run never.

--json prints one JSON object per read (one line; one per redraw with
--watch), with a stable schema described in docs/cli.md ("herd status --json").
--watch redraws every --interval until Ctrl-C or SIGTERM; on a terminal the
screen is cleared before each redraw. Colour is used on a terminal only
(--color always|never to choose; NO_COLOR is honoured).`

func statusCmd() *cobra.Command {
	o := statusOpts{}
	cmd := &cobra.Command{
		Use:   "status [--store URL] [--group G] [--jobs] [--watch] [--json] [--all]",
		Short: "Show members, partitions, owners, checkpoints, and why a partition is not running",
		Long:  statusLong,
		Example: `  herd status --store redis://127.0.0.1:6379/0 --group orders
  herd status --store redis://127.0.0.1:6379/0                 # every group in the store
  herd status --store redis://127.0.0.1:6379/0 --group orders --watch --interval 2s
  herd status --store redis://127.0.0.1:6379/0 --group orders --json | jq '.groups[0].counts'
  herd status --store redis://127.0.0.1:6379/0 --group aggregate --jobs
  HERD_STORE=redis://:pw@redis:6379 HERD_GROUP=orders herd status --all`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStatus(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.storeURL, "store", defaultRunStore, storeFlagUsage)
	f.StringVar(&o.group, "group", "", "the group to show (default: every group in the store); a group the store does not hold is an error (exit status 5)")
	f.BoolVar(&o.watch, "watch", false, "redraw every --interval until Ctrl-C")
	f.DurationVar(&o.interval, "interval", time.Second, "time between redraws with --watch, 100ms to 1h")
	f.BoolVar(&o.json, "json", false, "print JSON (one object per read) instead of tables")
	f.BoolVar(&o.all, "all", false, "list every partition, running ones included, and records outside the set")
	f.BoolVar(&o.jobs, "jobs", false, "show groups whose kind is not known (written by an older herd) as jobs groups; a jobs group always shows its blackboard")
	f.IntVar(&o.limit, "limit", 50, "without --all: list every partition of a group of at most this many, else at most this many not running, 1 to "+commas(maxStatusLimit))
	f.StringVar(&o.color, "color", "auto", "colour the table: auto (on a terminal, unless NO_COLOR is set), always or never")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long connecting and each read may take, 100ms to 10m")
	f.BoolVar(&o.check, "check", false, "exit 7 unless every partition of the group runs (with --jobs: and no key is overdue), within --grace; reads again every --interval")
	f.DurationVar(&o.grace, "grace", 0, "how long --check waits for a group to be healthy, 0 to 1h (default: the longer of 10s and the TTL left on the group's live sessions)")
	return cmd
}

// validate checks every flag of status.
func (o statusOpts) validate() (*connector, error) {
	if o.group != "" {
		if err := store.ValidateID("group", o.group); err != nil {
			return nil, fmt.Errorf("--group: %w", err)
		}
	}
	if err := checkDuration("interval", o.interval, 100*time.Millisecond, time.Hour); err != nil {
		return nil, err
	}
	if err := checkDuration("timeout", o.timeout, 100*time.Millisecond, 10*time.Minute); err != nil {
		return nil, err
	}
	if err := checkInt("limit", o.limit, 1, maxStatusLimit); err != nil {
		return nil, err
	}
	if o.check && o.watch {
		return nil, errors.New("--check and --watch: give one")
	}
	if err := checkDuration("grace", o.grace, 0, time.Hour); err != nil {
		return nil, err
	}
	switch o.color {
	case "auto", "always", "never":
	default:
		return nil, fmt.Errorf("--color %q is not one of auto, always, never", o.color)
	}
	if o.conn != nil {
		return o.conn, nil
	}
	return readConnector(o.storeURL)
}

// storeConnector is newConnector for the commands that read or change a
// store other processes use: mem:// is refused, since this process's own
// in-process store starts empty.
func storeConnector(url string) (*connector, error) {
	conn, err := newConnector(url)
	if err != nil {
		return nil, err
	}
	if conn.mem != nil {
		return nil, errors.New("--store mem:// is this process's own store, which starts empty: give the URL of the store the group is in")
	}
	return conn, nil
}

func runStatus(ctx context.Context, out io.Writer, o statusOpts) error {
	conn, err := o.validate()
	if err != nil {
		return withExit(exitUsage, err) // a flag's value
	}
	secrets := secretsIn(o.storeURL)
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	st, err := conn.connect(cctx)
	cancel()
	if err != nil {
		return connectErr(err, o.storeURL)
	}
	defer func() { st.Close() }()
	// A read-only SQLite store that no process had open reads the file as
	// it was at open (sqlitestore.WithReadOnly): --watch opens it anew for
	// every read, and so does --check.
	reopen := (o.watch || o.check) && conn.readOnly && conn.scheme == "sqlite"
	ts := textStyle{colour: o.color == "always" || o.color == "auto" && isTerminal(out) && os.Getenv("NO_COLOR") == ""}
	q := statusQuery{all: o.all, limit: o.limit, jobs: o.jobs}
	shown := redact(o.storeURL, secrets)
	if conn.mem != nil {
		shown = "mem://"
	}
	read := func() (*statusReport, error) {
		rctx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		if reopen {
			fresh, err := conn.connect(rctx)
			if err != nil {
				return nil, redactErr(connectErr(err, o.storeURL), secrets)
			}
			st.Close()
			st = fresh
		}
		rep, err := readStatus(rctx, st, shown, o.group, q)
		if rep != nil {
			for i := range rep.Groups {
				g := &rep.Groups[i]
				redactPtr(&g.Error, secrets)
				for j := range g.Jobs {
					redactPtr(&g.Jobs[j].Error, secrets)
					redactPtr(&g.Jobs[j].RecordError, secrets)
				}
			}
		}
		if err != nil {
			return rep, redactErr(err, secrets)
		}
		return rep, nil
	}
	write := func(rep *statusReport) error {
		if o.json {
			b, err := json.Marshal(rep)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "%s\n", b)
			return err
		}
		return writeText(out, rep, ts)
	}

	if o.check {
		return runCheck(ctx, o.grace, o.interval, read, write)
	}
	if !o.watch {
		rep, err := read()
		if err != nil {
			return err
		}
		if err := write(rep); err != nil {
			return err
		}
		return groupErrors(rep)
	}
	return watchStatus(ctx, out, o, shown, read, write)
}

// redactPtr redacts the passwords out of *p, if it is not nil.
func redactPtr(p **string, secrets []string) {
	if *p != nil {
		r := redact(**p, secrets)
		*p = &r
	}
}

// groupErrors is the error of a report some of whose groups could not be
// read (nil if every group was read).
func groupErrors(rep *statusReport) error {
	var failed []string
	for _, g := range rep.Groups {
		if g.Error != nil {
			failed = append(failed, fmt.Sprintf("group %q: %s", g.Group, *g.Error))
		}
	}
	switch len(failed) {
	case 0:
		return nil
	case 1:
		return errors.New(failed[0])
	}
	return fmt.Errorf("%d groups could not be read; %s", len(failed), strings.Join(failed, "; "))
}

// readStatus reads group, or every group of the store if group is "".
func readStatus(ctx context.Context, st store.Store, shown, group string, q statusQuery) (*statusReport, error) {
	rep := &statusReport{Store: shown, Time: time.Now(), Groups: []groupStatus{}}
	groups := []string{group}
	if group != "" {
		if err := checkGroupExists(ctx, st, group); err != nil {
			return nil, err
		}
	} else {
		var err error
		if groups, err = listGroups(ctx, st); err != nil {
			return nil, err
		}
	}
	for _, g := range groups {
		gs := readGroup(ctx, st, g, q)
		if gs.Error != nil && len(groups) == 1 {
			return nil, fmt.Errorf("group %q: %s", g, *gs.Error)
		}
		rep.Groups = append(rep.Groups, gs)
	}
	return rep, nil
}

// listGroups lists the store's groups, if the store can.
func listGroups(ctx context.Context, st store.Store) ([]string, error) {
	gl, ok := st.(store.GroupLister)
	if !ok {
		return nil, errors.New("this store cannot list its groups (it does not implement store.GroupLister): give --group")
	}
	gs, err := gl.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the groups: %w", err)
	}
	return gs, nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// watchStatus is herd status --watch: read and write every o.interval
// until ctx ends, a failed read shown and tried again.
func watchStatus(ctx context.Context, out io.Writer, o statusOpts, shown string, read func() (*statusReport, error), write func(*statusReport) error) error {
	terminal := isTerminal(out)
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for {
		rep, err := read()
		if ctx.Err() != nil {
			return nil // Ctrl-C or SIGTERM: the end of --watch, not an error
		}
		var frame strings.Builder
		if terminal && !o.json {
			frame.WriteString("\x1b[H\x1b[2J")
		}
		if !o.json {
			fmt.Fprintf(&frame, "%s  every %v  (Ctrl-C to stop)\n\n", time.Now().Format("2006-01-02 15:04:05"), o.interval)
		}
		if _, werr := io.WriteString(out, frame.String()); werr != nil {
			return werr
		}
		switch {
		case err != nil && o.json:
			b, _ := json.Marshal(map[string]string{"store": shown, "error": err.Error()})
			fmt.Fprintf(out, "%s\n", b)
		case err != nil:
			fmt.Fprintf(out, "error: %v (trying again in %v)\n", err, o.interval)
		default:
			if werr := write(rep); werr != nil {
				return werr
			}
		}
		if !terminal && !o.json {
			fmt.Fprintln(out)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
