package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/herdhq/herd/dashboard"
)

// dashboardTokenEnv is the variable --token is read from when not given
// (a token on the command line is visible to every user of the host in
// its process list).
const dashboardTokenEnv = "HERD_DASHBOARD_TOKEN"

type dashboardOpts struct {
	storeURL string
	addr     string
	token    string
	actions  bool // --allow-actions
	timeout  time.Duration
	conn     *connector          // tests: use this store instead of storeURL's
	ready    func(url string)    // tests: called with the page's URL once it listens
	log      func() *slog.Logger // the command's logger
	env      func(string) string // os.Getenv, or a test's
}

func dashboardCmd() *cobra.Command {
	o := dashboardOpts{}
	cmd := &cobra.Command{
		Use:   "dashboard [--store URL] [--addr 127.0.0.1:8080] [--token TOKEN] [--allow-actions]",
		Short: "Serve a live web page of a store's groups: members and partition map",
		Long: `dashboard serves a web page of the store's groups: per group its members
(weight, partitions owned), a map of its partitions coloured by owner (hover
a cell for its id, owner and epoch; search by id) and the partitions nobody
runs, with why. The page follows each group's log: a change shows within a
second, and all the pages open on a group share one reader of its log.

It only reads, unless --allow-actions is given: the store is opened
read-only, and the page has no action. With --allow-actions the page offers
"run now", "pause" and "resume" on a jobs group's keys and "leave" on a
member: each logs a request in the group, which the key's owner (or the
member) reads from the log it follows and acts on under its own epoch; the
dashboard never writes a record. A request for a key nobody owns, or a
member that is not running, is dropped. Every action is logged.
--addr is host:port; a port alone (8080 or :8080) listens on 127.0.0.1 only:
name a host (0.0.0.0:8080) to serve other machines, and then set a token.
With a token (--token, or better ` + dashboardTokenEnv + `, which no process
list shows) every request needs it: as "Authorization: Bearer TOKEN", or as
the password of the login the browser asks for (any user name). The page
never shows the store's URL or an error's text (the log has them).
SIGINT or SIGTERM stops it. docs/dashboard.md describes the page.`,
		Example: `  herd dashboard --store redis://127.0.0.1:6379/0
  herd dashboard --store sqlite://herd.db --addr 9000
  HERD_DASHBOARD_TOKEN=$(openssl rand -hex 16) herd dashboard --store postgres://herd@db/herd --addr 0.0.0.0:8080
  HERD_DASHBOARD_TOKEN=$(openssl rand -hex 16) herd dashboard --store redis://127.0.0.1:6379/0 --allow-actions`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.log = func() *slog.Logger { return logger(cmd) }
			return runDashboard(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.storeURL, "store", defaultRunStore, storeFlagUsage)
	f.StringVar(&o.addr, "addr", "127.0.0.1:8080", "where to serve the page: host:port; a port alone listens on 127.0.0.1 only")
	f.StringVar(&o.token, "token", "", "a token every request must carry (default $"+dashboardTokenEnv+"; empty: none)")
	f.BoolVar(&o.actions, "allow-actions", false, "let the page request runs, pauses and resumes of keys and a member's leave (opens the store for writing)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long connecting to the store may take, 100ms to 10m")
	return cmd
}

// dashboardAddr reads --addr: metricsAddr's rule, and a bare port is the
// loopback interface's.
func dashboardAddr(addr string) (string, error) {
	if _, err := strconv.Atoi(addr); err == nil {
		addr = ":" + addr
	}
	return loopbackAddr("--addr", addr, "8080")
}

func runDashboard(ctx context.Context, out io.Writer, o dashboardOpts) error {
	if err := checkDuration("timeout", o.timeout, 100*time.Millisecond, 10*time.Minute); err != nil {
		return withExit(exitUsage, err)
	}
	listen, err := dashboardAddr(o.addr)
	if err != nil {
		return withExit(exitUsage, err)
	}
	getenv := o.env
	if getenv == nil {
		getenv = os.Getenv
	}
	if o.token == "" {
		o.token = getenv(dashboardTokenEnv)
	}
	log := slog.Default()
	if o.log != nil {
		log = o.log()
	}
	conn := o.conn
	if conn == nil {
		// Actions log requests in the store (store.Store.Request): the
		// store is opened for writing then, and only then.
		open := readConnector
		if o.actions {
			open = storeConnector
		}
		if conn, err = open(o.storeURL); err != nil {
			return err
		}
	}
	secrets := secretsIn(o.storeURL)
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	st, err := conn.connect(cctx)
	cancel()
	if err != nil {
		return redactErr(connectErr(err, o.storeURL), secrets)
	}
	defer st.Close()
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("--addr %s: %w (another process listens there: give another port, or :0 for any)", o.addr, err)
	}
	opts := []dashboard.Option{dashboard.WithToken(o.token), dashboard.WithLogger(log)}
	if o.actions {
		opts = append(opts, dashboard.WithActions())
		if o.token == "" {
			log.Warn("actions are on without a token: anyone who reaches --addr may run keys and make members leave; set " + dashboardTokenEnv)
		}
	}
	h := dashboard.New(st, opts...)
	return serveDashboard(ctx, out, ln, h, o, log)
}

// serveDashboard serves h on ln until ctx ends, then closes the event
// streams and lets the requests in flight finish for up to 5 s.
func serveDashboard(ctx context.Context, out io.Writer, ln net.Listener, h *dashboard.Handler, o dashboardOpts, log *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String() + "/"
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() && o.token == "" {
		log.Warn("the dashboard is served to other machines without a token: set " + dashboardTokenEnv)
	}
	if _, err := fmt.Fprintf(out, "herd dashboard: %s (Ctrl-C stops it)\n", url); err != nil {
		log.Warn("writing the dashboard's address", "err", err)
	}
	if o.ready != nil {
		o.ready(url)
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	h.Close() // ends the event streams, which Shutdown would wait for
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		srv.Close()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving the dashboard: %w", err)
	}
	return nil
}
