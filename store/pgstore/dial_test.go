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

	"github.com/jackc/pgx/v5/pgconn"
)

// hangFirst is a dial whose first attempt hangs until its context ends (a
// SYN lost) and whose later ones connect; attempts counts them.
func hangFirst(attempts *atomic.Int32) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if attempts.Add(1) == 1 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		c, _ := net.Pipe()
		return c, nil
	}
}

// The URL's dial_stagger and WithDialStagger (which overrides it) reach
// the dialer of the pool's connections and of the LISTEN connection: a
// dial whose first attempt hangs connects with the second, one stagger
// later. (The staggered dial itself is internal/stagger's, tested there.)
func TestDialStaggerReachesTheDialer(t *testing.T) {
	for _, tc := range []struct {
		url  string
		opts []Option
		want time.Duration
	}{
		{"postgres://h/db", nil, DefaultDialStagger},
		{"postgres://h/db?dial_stagger=500ms", nil, 500 * time.Millisecond},
		{"postgres://h/db", []Option{WithDialStagger(50 * time.Millisecond)}, 50 * time.Millisecond},
		{"postgres://h/db?dial_stagger=500ms", []Option{WithDialStagger(50 * time.Millisecond)}, 50 * time.Millisecond},
	} {
		tg, err := parseURL(tc.url)
		if err != nil {
			t.Fatalf("parseURL(%q): %v", tc.url, err)
		}
		for _, which := range []string{"pool", "listen"} {
			synctest.Test(t, func(t *testing.T) {
				var attempts atomic.Int32
				pc, lc, _, err := poolConfig(tg, hangFirst(&attempts), tc.opts)
				if err != nil {
					t.Fatalf("poolConfig(%q): %v", tc.url, err)
				}
				dial := pc.ConnConfig.DialFunc
				if which == "listen" {
					dial = lc.DialFunc
				}
				start := time.Now()
				c, err := dial(t.Context(), "tcp", "h:5432")
				if err != nil {
					t.Fatalf("%s, %s dial: %v", tc.url, which, err)
				}
				c.Close()
				if took := time.Since(start); took != tc.want || attempts.Load() != 2 {
					t.Errorf("%s with %d options, %s dial: connected after %v and %d attempts; want %v and 2",
						tc.url, len(tc.opts), which, took, attempts.Load(), tc.want)
				}
			})
		}
	}
}

// A unix socket, and a stagger of 0, dial once: the attempt connects or
// fails on its own, and the dial ends with it.
func TestDialOnceWithoutStagger(t *testing.T) {
	tg, err := parseURL("postgres://h/db")
	if err != nil {
		t.Fatal(err)
	}
	hang := func(attempts *atomic.Int32) pgconn.DialFunc {
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			attempts.Add(1)
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	synctest.Test(t, func(t *testing.T) {
		var attempts atomic.Int32
		pc, _, _, err := poolConfig(tg, hang(&attempts), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err = pc.ConnConfig.DialFunc(ctx, "unix", "/run/postgresql/.s.PGSQL.5432")
		if !errors.Is(err, context.DeadlineExceeded) || attempts.Load() != 1 {
			t.Errorf("unix socket dial: %v after %d attempts; want the deadline after 1", err, attempts.Load())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		var attempts atomic.Int32
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := staggered(hang(&attempts), 0)(ctx, "tcp", "h:5432")
		if !errors.Is(err, context.DeadlineExceeded) || attempts.Load() != 1 {
			t.Errorf("dial with stagger 0: %v after %d attempts; want the deadline after 1", err, attempts.Load())
		}
	})
}

// A TCP connection of the pool whose read fails on its deadline (a call
// given up on) is reset at once: the server sees the reset, not a
// connection that lives on.
func TestPoolConnectionResetOnTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tg, err := parseURL("postgres://" + l.Addr().String() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	pc, lc, _, err := poolConfig(tg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	accept := func() net.Conn {
		t.Helper()
		c, err := l.Accept()
		if err != nil {
			t.Fatalf("Accept: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		return c
	}

	c, err := pc.ConnConfig.DialFunc(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("pool dial: %v", err)
	}
	defer c.Close()
	server := accept()
	_ = c.SetReadDeadline(time.Now())
	var ne net.Error
	if _, err := c.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v; want a timeout", err)
	}
	if _, err := server.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("server's read after the pool connection's timeout: %v; want ECONNRESET", err)
	}

	// The LISTEN connection waits for notifications with a deadline and
	// goes on after it: it is not reset.
	lconn, err := lc.DialFunc(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("LISTEN dial: %v", err)
	}
	defer lconn.Close()
	server = accept()
	_ = lconn.SetReadDeadline(time.Now())
	_, _ = lconn.Read(make([]byte, 1))
	if _, err := lconn.Write([]byte{1}); err != nil {
		t.Fatalf("LISTEN connection's write after a read timeout: %v; want it alive", err)
	}
	if _, err := server.Read(make([]byte, 1)); err != nil {
		t.Fatalf("server's read from the LISTEN connection: %v; want its byte", err)
	}
}
