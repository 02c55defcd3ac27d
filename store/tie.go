package store

import (
	"context"
	"sync"
	"time"
)

// ConnTied is implemented by a backend that can tie a session to a
// connection of the member's own, so that the death of the member's
// process ends the session after a short grace instead of its TTL (see
// docs/takeover.md). It is optional: the member runtime uses it when the
// store offers it and the member's configuration asks for it. A backend
// offers it only where it can keep the rule below.
//
// The rule: a tied session ends (as an expiry: SessionExpired is logged
// by the call that ends it) no earlier than Grace after the store saw
// the tie's connection closed, and soon after that without anyone
// waiting for its TTL (the backend itself calls what ends it, or tells
// members through KeepAlive's next), and a connection the store sees closed
// while the member lives is seen closed by the member too (Tie.Lost),
// which then stops its handlers at once. Host crashes, network cuts and
// stalls still end sessions by TTL only: a backend must make sure that
// such a failure cannot close the connection on the store's side before
// the member's TTL fence.
type ConnTied interface {
	// TieSession ties a live session to a connection the backend
	// dedicates to it, and returns the tie. It fails (and the session
	// keeps its TTL alone) if the session is not alive
	// (ErrSessionExpired), the store cannot be reached
	// (ErrUnavailable), or the backend cannot tie it safely here (an
	// error wrapping errors.ErrUnsupported).
	TieSession(ctx context.Context, group, session string, cfg TieConfig) (Tie, error)
}

// TieConfig configures a tie.
type TieConfig struct {
	// TTL is the session's TTL: the backend sets its connection's
	// timeouts so that a failure that leaves the member unaware cannot
	// close it before the TTL has passed.
	TTL time.Duration
	// Grace is how long after the store sees the connection closed the
	// session ends: it covers the member's noticing and its handlers'
	// stopping. Above 0 and below TTL.
	Grace time.Duration
}

// Tie is a session's tie to a connection.
type Tie interface {
	// Lost is closed when the tie's connection ended by anything but
	// Close: the store ends the session after the tie's Grace, and the
	// member must stop its handlers now.
	Lost() <-chan struct{}
	// Err is why Lost was closed (nil before).
	Err() error
	// Close ends the tie and closes its connection. The session then
	// ends after Grace, unless it was closed before: call it once the
	// session's handlers have returned. Closing twice is harmless.
	Close() error
}

// TieLoss is the Lost and Err of a Tie, for backends to embed: Lose
// closes Lost once, with the reason Err returns from then on. Its zero
// value is not ready: use NewTieLoss.
type TieLoss struct {
	lost chan struct{}
	once sync.Once
	err  error // written before lost is closed
}

// NewTieLoss returns a TieLoss not lost yet.
func NewTieLoss() *TieLoss { return &TieLoss{lost: make(chan struct{})} }

// Lost is closed when the tie is lost (see Tie).
func (l *TieLoss) Lost() <-chan struct{} { return l.lost }

// Err says why the tie was lost; nil while it is not.
func (l *TieLoss) Err() error {
	select {
	case <-l.lost:
		return l.err
	default:
		return nil
	}
}

// Lose marks the tie lost because of err; later calls do nothing.
func (l *TieLoss) Lose(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.lost)
	})
}
