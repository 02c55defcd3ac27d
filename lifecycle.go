package herd

// A member's lifecycle: how it is told to leave or stop, and how it says
// that it has stopped and why.

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// lifecycle is what Join, Leave and the reconcile loop use to stop the
// member and to say that it stopped. Member.runCtx, cancelled by stop, is
// kept on Member itself: nearly every store call derives from it.
type lifecycle struct {
	stop context.CancelFunc // cancels Member.runCtx: a crash (Join's ctx) or the end of Leave
	// attemptCtx bounds the store calls made between sessions (restores,
	// opening a session): it is cancelled by Leave, so a Leave during an
	// outage does not wait for them.
	attemptCtx  context.Context
	stopAttempt context.CancelFunc

	leaveOnce sync.Once
	leaveCh   chan struct{} // closed by Leave
	done      chan struct{} // closed when every goroutine has returned

	errMu sync.Mutex
	err   error // why the member stopped, for Leave/Err
}

// Leave hands every partition over gracefully: handlers are cancelled, each
// partition is released as soon as its handler has returned, then the session
// is closed, which wakes the other members at once. It returns when all that
// is done, or with an error if ctx ends first (the member goes on leaving in
// the background; cancel Join's context to abandon it).
func (m *Member) Leave(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("leave")
	}
	m.life.leaveOnce.Do(func() { close(m.life.leaveCh); m.life.stopAttempt() })
	select {
	case <-m.life.done:
		if err := m.Err(); err != nil && !errors.Is(err, ErrLeft) {
			return err
		}
		return nil
	case <-ctx.Done():
		if waiting := m.handlersRunning(); len(waiting) > 0 {
			return fmt.Errorf("herd: leave %q: handlers have not returned yet (%s): %w",
				m.cfg.Group, listIDs(waiting), ctx.Err())
		}
		return fmt.Errorf("herd: leave %q: every handler has returned; still releasing partitions and closing the session: %w",
			m.cfg.Group, ctx.Err())
	}
}

// Done is closed when the member has stopped (left, or crashed via Join's ctx)
// and every goroutine it started has returned.
func (m *Member) Done() <-chan struct{} { return m.life.done }

// Err says why the member stopped (ErrLeft after Leave, the context's error
// after a cancellation); nil while running.
func (m *Member) Err() error {
	m.life.errMu.Lock()
	defer m.life.errMu.Unlock()
	return m.life.err
}

func (m *Member) setErr(err error) {
	m.life.errMu.Lock()
	defer m.life.errMu.Unlock()
	if m.life.err == nil {
		m.life.err = err
	}
}
