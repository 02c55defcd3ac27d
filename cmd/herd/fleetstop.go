package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/herdhq/herd"
)

// How the bench stops its member processes: SIGKILL for a crash, SIGTERM
// (and SIGKILL after a grace) for a leave and at the end.

// crash kills a member with SIGKILL, as a machine or OOM killer would, and
// waits until it is reaped.
func (f *procFleet) crash(id string) error {
	m := f.byID(id)
	if m == nil {
		return fmt.Errorf("no member %s", id)
	}
	f.mu.Lock()
	m.gone, m.killedAt = true, time.Now().UnixNano()
	f.mu.Unlock()
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing member %s: %w", id, err)
	}
	<-m.exited
	return nil
}

// leave sends a member SIGTERM, as a deployment stops a process, and waits
// until it left and exited (SIGKILL after leaveTimeout and more).
func (f *procFleet) leave(id string) error {
	m := f.byID(id)
	if m == nil {
		return fmt.Errorf("no member %s", id)
	}
	f.mu.Lock()
	m.gone = true
	f.mu.Unlock()
	return f.terminate(m, f.leaveGrace())
}

// terminate sends m SIGTERM and waits for it; after grace, SIGKILL.
func (f *procFleet) terminate(m *memberProc, grace time.Duration) error {
	if m.cmd.Process == nil {
		return nil // never started
	}
	m.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-m.exited:
		if !m.cmd.ProcessState.Success() {
			return fmt.Errorf("member %s: %v%s", m.id, m.cmd.ProcessState, m.stderr.suffix())
		}
		return nil
	case <-t.C:
		m.cmd.Process.Kill() //nolint:errcheck // it may have exited
		<-m.exited
		return fmt.Errorf("member %s did not leave within %v: killed", m.id, grace)
	}
}

// stopAll terminates members in parallel and waits until each is reaped.
func (f *procFleet) stopAll(ms []*memberProc) error {
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.mu.Lock()
			m.gone = true
			f.mu.Unlock()
			errs[i] = f.terminate(m, f.leaveGrace())
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// close stops every member process (SIGTERM, then SIGKILL for those that
// did not leave in time), reaps them all, then deletes the group.
func (f *procFleet) close() error {
	f.mu.Lock()
	var running []*memberProc
	for _, m := range f.all {
		if !m.reaped {
			running = append(running, m)
		}
	}
	f.mu.Unlock()
	var errs []error
	if len(running) > 0 {
		f.logf("stopping %d member processes", len(running))
		if err := f.stopAll(running); err != nil {
			errs = append(errs, fmt.Errorf("stopping the members: %w", err))
		}
	}
	if !f.touched {
		return errors.Join(errs...)
	}
	dctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	st, err := f.connect(dctx)
	if err == nil {
		err = herd.DeleteGroup(dctx, st, f.group, true)
		st.Close()
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("deleting group %q (delete it with herd group delete --force): %w", f.group, err))
	}
	return errors.Join(errs...)
}

// tailBuffer keeps the last 2 KiB written to it: a member's stderr, shown
// when it fails.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2048 {
		t.b = t.b[len(t.b)-2048:]
	}
	return len(p), nil
}

// suffix is ": " and the tail, or "" if nothing was written.
func (t *tailBuffer) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.b) == 0 {
		return ""
	}
	return " (stderr: " + string(t.b) + ")"
}
