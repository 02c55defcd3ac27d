package redisstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/store"
)

// silentServer accepts connections and reads from them but never answers,
// like a Redis behind a network that dropped its replies. Every read that
// gets bytes is signalled on the returned channel (without blocking).
func silentServer(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	got := make(chan struct{}, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					select {
					case got <- struct{}{}:
					default:
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), got
}

// A call waiting on a server that does not answer returns as soon as its
// context is cancelled, though go-redis itself only honours deadlines: a
// member's handler blocked in a checkpoint must stop when its claim is
// cancelled. The client's timeouts are an hour, so without the store's own
// handling of cancellation this test would hang until the test timeout.
func TestCancelledCallReturnsFromSilentServer(t *testing.T) {
	addr, got := silentServer(t)
	client := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ReadTimeout:           time.Hour,
		WriteTimeout:          time.Hour,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	s := New(client, WithPrefix("herdtest:silent:"))

	calls := map[string]func(ctx context.Context) error{
		"Checkpoint": func(ctx context.Context) error {
			return s.Checkpoint(ctx, "g", "p", 1, []byte("v"))
		},
		"Snapshot": func(ctx context.Context) error {
			_, err := s.Snapshot(ctx, "g")
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- call(ctx) }()
			<-got // the call (or its connection's handshake) is in flight
			cancel()
			err := <-done
			if !errors.Is(err, context.Canceled) || !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("%s after cancellation: got %v, want an error wrapping context.Canceled and store.ErrUnavailable", name, err)
			}
		})
	}
}
