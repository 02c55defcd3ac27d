package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/blackhole"
	"github.com/herdhq/herd/store"
)

// A server that accepts the connection and never answers: Open fails
// with ErrUnavailable after the default connect timeout, even with a
// context that never ends, instead of hanging for ever.
func TestOpenBoundedWhenServerNeverAnswers(t *testing.T) {
	addr := blackhole.Listen(t)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		s, err := Open(context.Background(), "postgres://herd@"+addr+"/test")
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Open against a server that never answers: %v; want ErrUnavailable", err)
		}
		if took := time.Since(start); took < DefaultConnectTimeout-time.Second {
			t.Fatalf("Open failed after %v, before the connect timeout %v: %v", took, DefaultConnectTimeout, err)
		}
	case <-time.After(3 * DefaultConnectTimeout):
		t.Fatalf("Open against a server that never answers has not returned after %v; want an error after the connect timeout %v",
			3*DefaultConnectTimeout, DefaultConnectTimeout)
	}
}
