package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/child"
)

// What herd run and herd jobs share about their children and their own
// stop: how a child is stopped when its work is cancelled, and how a
// signal makes the member leave (a second one forces it).

// stopChild ends a child whose context was cancelled. A handoff (or a
// Leave, or a run's timeout) gives it grace after SIGTERM, then SIGKILL. A
// session that has ended (sessionDone: fenced on the local clock, expired
// in the store, or the member stopped) kills it at once, before or during
// that grace: another member may start the work as soon as the store
// expires the session. force (a second signal) kills it at once too. attrs
// name the child in log lines.
func stopChild(log *slog.Logger, p *child.Process, grace time.Duration, sessionDone <-chan struct{}, cause func() error, force <-chan struct{}, attrs ...any) {
	lost := func() {
		log.Warn("session lost: killing the child now", append(attrs, "cause", cause())...)
	}
	select {
	case <-sessionDone:
		lost()
		p.Stop(0)
		return
	default:
	}
	stopped := make(chan bool, 1)
	go func() { stopped <- p.Stop(grace) }()
	select {
	case killed := <-stopped:
		if killed {
			log.Warn("the child did not exit within --max-shutdown after SIGTERM; killed", append(attrs, "max_shutdown", grace)...)
		}
		return
	case <-sessionDone:
		lost()
	case <-force:
	}
	p.Signal(syscall.SIGKILL)
	<-stopped
}

// leaveOnSignal waits for the first of: ctx done or a signal (leave),
// or the member stopping on its own (an error, unless it left on a
// request in the group's log: herd.ErrLeaveRequested). To leave it calls leave
// and waits for it; a second signal meanwhile closes force (children are
// killed at once) and cancels leave. crash then stops the member for good,
// and stopped is waited for. what names the member's children in logs
// ("children", "runs").
func leaveOnSignal(ctx context.Context, sigs <-chan os.Signal, stopped <-chan struct{}, stoppedErr func() error,
	leave func(context.Context) error, crash func(), force chan struct{}, log *slog.Logger, cmd string) error {
	signals := 0
	select {
	case <-ctx.Done():
	case <-sigs:
		signals++
	case <-stopped:
		if err := stoppedErr(); !errors.Is(err, herd.ErrLeaveRequested) {
			return fmt.Errorf("%s: the member stopped: %w", cmd, err)
		}
		// A leave requested through the group's log (the dashboard's
		// "leave"): the member has left gracefully, as on a signal.
		crash()
		log.Info("left the group on request (the dashboard's leave action)")
		return nil
	}
	log.Info("leaving: stopping children and handing work off (a second signal kills them at once)")
	leaveCtx, cancelLeave := context.WithCancel(context.Background())
	defer cancelLeave()
	left := make(chan error, 1)
	go func() { left <- leave(leaveCtx) }()
	for {
		select {
		case err := <-left:
			crash()
			<-stopped
			if signals >= 2 {
				return fmt.Errorf("%s: forced stop: children killed, work not handed off (it runs elsewhere once the session expires, within --ttl): %w", cmd, context.Canceled)
			}
			if err != nil {
				return fmt.Errorf("%s: leave: %w", cmd, err)
			}
			return nil
		case <-sigs:
			if signals++; signals == 2 {
				log.Warn("second signal: killing children now")
				close(force)
				cancelLeave()
			}
		}
	}
}
