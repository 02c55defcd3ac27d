package store

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// ghostBackend records the calls Ghosts.OpenSession makes.
type ghostBackend struct {
	opened, closed []string
	openErr        error // what the next open returns
	closeErr       error // what every close returns
}

func (b *ghostBackend) open(g *Ghosts, group string, ttl time.Duration) (string, error) {
	return g.OpenSession(group, ttl, "test: OpenSession",
		func(id string) error {
			if b.closeErr != nil {
				return b.closeErr
			}
			b.closed = append(b.closed, id)
			return nil
		},
		func(id string) (string, error) {
			b.opened = append(b.opened, id)
			err := b.openErr
			b.openErr = nil
			if err != nil {
				return "", err
			}
			return "ok", nil
		})
}

func TestGhostsClosesTheSessionOfAFailedOpenFirst(t *testing.T) {
	var g Ghosts
	b := &ghostBackend{openErr: fmt.Errorf("deadline: %w", ErrUnavailable)}
	if _, err := b.open(&g, "g", time.Minute); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("open: %v; want ErrUnavailable", err)
	}
	ghost := b.opened[0]
	if _, err := b.open(&g, "other", time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(b.closed) != 0 {
		t.Fatalf("an open of another group closed %v", b.closed)
	}
	id, err := b.open(&g, "g", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.closed, []string{ghost}) || id == ghost {
		t.Fatalf("closed %v, opened %s; want %s closed first", b.closed, id, ghost)
	}
	if _, err := b.open(&g, "g", time.Minute); err != nil || len(b.closed) != 1 {
		t.Fatalf("a ghost closed twice: closed %v (err %v)", b.closed, err)
	}
}

func TestGhostsKeepsOnlyWhatMayHaveBeenOpened(t *testing.T) {
	var g Ghosts
	b := &ghostBackend{openErr: fmt.Errorf("bad weight: %w", ErrInvalid)}
	if _, err := b.open(&g, "g", time.Minute); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if _, err := b.open(&g, "g", time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(b.closed) != 0 {
		t.Fatalf("closed %v after an open the server refused", b.closed)
	}
}

func TestGhostsKeptWhenTheirCloseFails(t *testing.T) {
	var g Ghosts
	b := &ghostBackend{openErr: ErrUnavailable}
	_, _ = b.open(&g, "g", time.Minute)
	b.closeErr = fmt.Errorf("cut: %w", ErrUnavailable)
	if _, err := b.open(&g, "g", time.Minute); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("open whose ghost cannot be closed: %v; want the close's error", err)
	}
	if len(b.opened) != 1 {
		t.Fatalf("opened %v while a ghost could not be closed; want no new session", b.opened)
	}
	b.closeErr = nil
	if _, err := b.open(&g, "g", time.Minute); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.closed, b.opened[:1]) {
		t.Fatalf("closed %v; want the ghost %s", b.closed, b.opened[0])
	}
}

func TestGhostsForgottenAfterTwiceTheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Ghosts
		b := &ghostBackend{openErr: ErrUnavailable}
		_, _ = b.open(&g, "g", time.Second)
		time.Sleep(2*time.Second + time.Millisecond)
		if _, err := b.open(&g, "g", time.Second); err != nil {
			t.Fatal(err)
		}
		if len(b.closed) != 0 {
			t.Fatalf("closed %v, expired long ago", b.closed)
		}
	})
}

func TestGhostsKeepsAtMostMaxPerGroup(t *testing.T) {
	var g Ghosts
	until := time.Now().Add(time.Hour)
	for i := range maxGhosts + 5 {
		g.put("g", []ghost{{id: fmt.Sprint(i), until: until}})
	}
	b := &ghostBackend{}
	if _, err := b.open(&g, "g", time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(b.closed) != maxGhosts || b.closed[0] != "5" {
		t.Fatalf("closed %d ghosts from %v; want the last %d", len(b.closed), b.closed[:1], maxGhosts)
	}
}
