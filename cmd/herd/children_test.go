package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"

	"github.com/herdhq/herd"
)

// A member that left on a request in the group's log (the dashboard's
// "leave") has left gracefully, as on SIGTERM: herd run and herd jobs
// return nil (exit 0). A member that stopped otherwise is an error.
func TestLeaveOnSignalRequestedLeave(t *testing.T) {
	for _, c := range []struct {
		stopped error
		ok      bool
	}{
		{herd.ErrLeaveRequested, true},
		{herd.ErrSessionExpired, false},
	} {
		stopped := make(chan struct{})
		close(stopped)
		crashed := false
		err := leaveOnSignal(context.Background(), make(chan os.Signal), stopped, func() error { return c.stopped },
			func(context.Context) error { t.Fatal("leave called for a member that stopped"); return nil },
			func() { crashed = true }, make(chan struct{}), slog.New(slog.DiscardHandler), "run")
		if c.ok && (err != nil || !crashed) {
			t.Errorf("member stopped with %v: leaveOnSignal returned %v (crash called: %v); want nil, after crash", c.stopped, err, crashed)
		}
		if !c.ok && !errors.Is(err, c.stopped) {
			t.Errorf("member stopped with %v: leaveOnSignal returned %v; want that error", c.stopped, err)
		}
	}
}
