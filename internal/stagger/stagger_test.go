package stagger

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// An attempt that hangs (a SYN lost) does not hold the dial: the one
// started beside it after `every` connects, and the hung one is cancelled.
func TestLaterAttemptConnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		var cancelled atomic.Bool
		c, started, err := Dial(t.Context(), 200*time.Millisecond, 8, func(ctx context.Context) (net.Conn, error) {
			if n.Add(1) == 1 {
				<-ctx.Done()
				cancelled.Store(true)
				return nil, ctx.Err()
			}
			a, _ := net.Pipe()
			return a, nil
		})
		if err != nil || c == nil {
			t.Fatalf("Dial: %v, %v", c, err)
		}
		defer c.Close()
		if started != 2 {
			t.Errorf("started %d attempts, want 2", started)
		}
		synctest.Wait()
		if !cancelled.Load() {
			t.Error("the hung attempt was not cancelled")
		}
	})
}

// Attempts that fail at once (a refused connection) fail the dial at once.
func TestRefusedFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := errors.New("connection refused")
		begun := time.Now()
		_, started, err := Dial(t.Context(), 200*time.Millisecond, 8, func(context.Context) (net.Conn, error) {
			return nil, refused
		})
		if !errors.Is(err, refused) || started != 1 || time.Since(begun) != 0 {
			t.Errorf("err %v, %d attempts, after %v; want refused, 1, at once", err, started, time.Since(begun))
		}
	})
}

// When ctx ends, the dial ends with the attempts' error, and no more than
// max attempts were under way.
func TestDeadlineEndsTheDial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		var live, most atomic.Int32
		_, started, err := Dial(ctx, 100*time.Millisecond, 3, func(ctx context.Context) (net.Conn, error) {
			l := live.Add(1)
			if l > most.Load() {
				most.Store(l)
			}
			<-ctx.Done()
			live.Add(-1)
			return nil, ctx.Err()
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v, want the deadline", err)
		}
		if most.Load() > 3 || started != 3 {
			t.Errorf("%d attempts at most at once, %d started; want 3, 3", most.Load(), started)
		}
	})
}
