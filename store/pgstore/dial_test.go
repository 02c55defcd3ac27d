package pgstore

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// A dial whose first attempt hangs (its SYN lost) connects with the
// attempt started a stagger later; the hanging attempt is given up.
func TestStaggeredDialStartsAnotherAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var attempts atomic.Int32
		gaveUp := make(chan struct{})
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			if attempts.Add(1) == 1 {
				<-ctx.Done()
				close(gaveUp)
				return nil, ctx.Err()
			}
			c, _ := net.Pipe()
			return c, nil
		}
		start := time.Now()
		c, err := staggered(dial, 200*time.Millisecond)(t.Context(), "tcp", "db:5432")
		if err != nil {
			t.Fatalf("staggered dial: %v", err)
		}
		c.Close()
		if took := time.Since(start); took != 200*time.Millisecond || attempts.Load() != 2 {
			t.Fatalf("connected after %v and %d attempts; want 200ms and 2", took, attempts.Load())
		}
		<-gaveUp
	})
}

// A refused dial fails at once with the attempt's error; a dial that never
// connects fails when its context ends, with the last attempt's error.
func TestStaggeredDialFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		start := time.Now()
		_, err := staggered(refused, 200*time.Millisecond)(t.Context(), "tcp", "db:5432")
		if !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) != 0 {
			t.Fatalf("refused dial: %v after %v; want ECONNREFUSED at once", err, time.Since(start))
		}

		var attempts atomic.Int32
		hang := func(ctx context.Context, network, addr string) (net.Conn, error) {
			attempts.Add(1)
			<-ctx.Done()
			return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err = staggered(hang, 200*time.Millisecond)(ctx, "tcp", "db:5432")
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("dial that never connects: %v after %v; want the deadline's error after 1s", err, time.Since(start))
		}
		// The tick at 1s and the deadline are one instant: 5 or 6.
		if n := attempts.Load(); n < 5 || n > 6 {
			t.Fatalf("%d attempts in 1s; want one every 200ms", n)
		}
	})
}
