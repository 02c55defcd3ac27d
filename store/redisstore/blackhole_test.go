package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/blackhole"
	"github.com/herdhq/herd/store"
)

// A server that accepts the connection and never answers: Open fails with
// ErrUnavailable within a bound, even with a context that never ends.
func TestOpenBoundedWhenServerNeverAnswers(t *testing.T) {
	addr := blackhole.Listen(t)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		s, err := Open(context.Background(), "redis://"+addr)
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	const bound = 30 * time.Second
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Open against a server that never answers: %v after %v; want ErrUnavailable", err, time.Since(start))
		}
	case <-time.After(bound):
		t.Fatalf("Open against a server that never answers has not returned after %v", bound)
	}
}
