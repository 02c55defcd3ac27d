package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/herdhq/herd"
)

// metricsFlagUsage is the help of every command's --metrics flag.
const metricsFlagUsage = "serve Prometheus metrics on http://ADDR/metrics and health on /healthz; " +
	"host:port, and a port alone (:9090) listens on 127.0.0.1 only: name a host (0.0.0.0:9090) to serve other machines"

// newMetricsRegistry is the registry a command's members register their
// metrics with (herd.Config.Metrics), with the Go runtime's and the
// process's own metrics.
func newMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	return reg
}

// buildInfo is herd_build_info: 1, labelled with herd's version (as
// --version prints it, without the Go version) and the Go version it was
// built with.
func buildInfo() prometheus.Collector {
	v, _, _ := strings.Cut(version(), " (")
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "herd_build_info",
		Help:        "1, labelled with the version of herd and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": v, "goversion": runtime.Version()}})
	g.Set(1)
	return g
}

// metricsAddr checks --metrics and returns the address to listen on: a
// host and a numeric port. Without a host (":9090") it is the loopback
// interface, so that metrics and health are not served to other machines
// unless the user names a host (0.0.0.0, an interface's address): Go's
// usual reading of ":9090", every interface, would publish them silently.
func metricsAddr(addr string) (string, error) { return loopbackAddr("--metrics", addr, "9090") }

// loopbackAddr checks the address of flag (metricsAddr's rule): host:port,
// the loopback interface when the host is left out. port is the example
// port its errors show.
func loopbackAddr(flag, addr, port string) (string, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%s %q: want host:port, such as :%s (loopback only) or 0.0.0.0:%s (every interface)", flag, addr, port, port)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("%s %q: the port must be a number from 0 to 65535", flag, addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if strings.ContainsAny(host, "/@?# ") {
		return "", fmt.Errorf("%s %q: %q is not a host name or address", flag, addr, host)
	}
	return net.JoinHostPort(host, p), nil
}

// listenMetrics binds --metrics's address (see metricsAddr). Commands
// that join a group call it before they join: a port in use then fails the
// command before it has written anything to the store (a session, a
// partition set), instead of leaving a member that joined and exited.
func listenMetrics(ctx context.Context, addr string) (net.Listener, error) {
	listen, err := metricsAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w (another process listens there: give another port, or :0 for any)", addr, err)
	}
	return ln, nil
}

// serveMetrics serves, on addr (see metricsAddr), what serveMetricsOn
// serves; it returns the address it listens on (with the port chosen for
// port 0) once it listens, or why it cannot.
//
//	reg := newMetricsRegistry()
//	cfg.Metrics = reg
//	addr, stop, err := serveMetrics(ctx, o.metrics, reg, func() error { return membersHealth(m) }, log)
//	if err != nil { return err }
//	defer stop()
func serveMetrics(ctx context.Context, addr string, g prometheus.Gatherer, health func() error, log *slog.Logger) (bound string, stop func(), err error) {
	ln, err := listenMetrics(ctx, addr)
	if err != nil {
		return "", nil, err
	}
	bound, stop = serveMetricsOn(ctx, ln, g, health, log)
	return bound, stop, nil
}

// serveMetricsOn serves, on ln (which it closes), the metrics g gathers on
// /metrics (Prometheus' text format) and the process's health on /healthz:
// 200 "ok" while health returns nil, 503 and the error's text otherwise. It
// returns the address it listens on. It stops when ctx ends or stop is
// called (the caller must call stop: it waits until the server has shut
// down, letting requests in flight finish for up to 5 s).
func serveMetricsOn(ctx context.Context, ln net.Listener, g prometheus.Gatherer, health func() error, log *slog.Logger) (bound string, stop func()) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := health(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	bound = ln.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "addr", bound, "err", err)
		}
	}()
	log.Info("serving metrics and health", "metrics", "http://"+bound+"/metrics", "health", "http://"+bound+"/healthz")
	// shutdown runs once, from ctx's end or from stop, whichever comes
	// first; stop waits for it through once.Do, then for Serve to return.
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				srv.Close()
			}
		})
	}
	stopAfter := context.AfterFunc(ctx, shutdown)
	stop = func() {
		stopAfter()
		shutdown()
		<-done
	}
	return bound, stop
}

// membersHealth is /healthz's answer for a process running members: nil
// while every one holds a live session (herd.Member.SessionLive).
func membersHealth(ms ...*herd.Member) error {
	if len(ms) == 0 {
		return errors.New("no member is running")
	}
	var down []string
	for _, m := range ms {
		if !m.SessionLive() {
			down = append(down, m.ID())
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("no live session (lost, fenced, being reopened or stopped): member %s", strings.Join(down, ", "))
	}
	return nil
}

// joinedHealth is /healthz's answer for a command that serves its metrics
// before it joins (so that a port in use stops it before it writes to the
// store): 503 "not joined yet" until set is called, then membersHealth.
type joinedHealth struct{ m atomic.Pointer[herd.Member] }

func (h *joinedHealth) set(m *herd.Member) { h.m.Store(m) }

func (h *joinedHealth) check() error {
	m := h.m.Load()
	if m == nil {
		return errors.New("not joined yet")
	}
	return membersHealth(m)
}
