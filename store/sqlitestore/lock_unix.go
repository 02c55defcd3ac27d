//go:build unix

package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/herdhq/herd/store"
)

// Writers of every process queue for the file in the kernel, on an
// exclusive flock of the sidecar file (<db>-herd), before they begin their
// SQLite transaction. SQLite's own lock has no queue: a writer that finds
// it taken sleeps and tries again (1, 2, 5, 10 ... 100 ms), so with a
// dozen members claiming at once the lock sat free while they all slept
// (27 claims a second in all). A blocked flock is woken the moment the
// holder lets go. Every Store has its own open file description, so
// Stores of one process exclude each other too; a process that dies
// releases it with its descriptors. Writers that do not take it (a
// sqlite3 shell) still meet SQLite's lock, and wait for it as before.

// lockWriter takes the exclusive flock. It is called with s.gate held; if
// ctx ends first it returns an error and the flock attempt goes on in the
// background, which then releases the flock and the gate itself (handed
// over: handedOver is true, and the caller must not leave the gate).
func (s *Store) lockWriter(ctx context.Context, f *dbFile, op string) (handedOver bool, err error) {
	if f.side == nil {
		return false, nil
	}
	fd := int(f.side.Fd())
	if err := flock(fd, unix.LOCK_EX|unix.LOCK_NB); err == nil {
		return false, nil
	} else if !errors.Is(err, unix.EWOULDBLOCK) {
		return false, fmt.Errorf("sqlitestore: %s: locking %s: %w: %w", op, f.side.Name(), store.ErrUnavailable, err)
	}
	// The wait runs on a duplicate of the descriptor (the same open file
	// description, so the same lock), which the goroutine closes when it
	// is done: Close may close the original meanwhile.
	dup, err := unix.Dup(fd)
	if err != nil {
		return false, fmt.Errorf("sqlitestore: %s: locking %s: %w: %w", op, f.side.Name(), store.ErrUnavailable, err)
	}
	got := make(chan error) // unbuffered: the goroutine hands the lock over, or sees it abandoned
	abandoned := make(chan struct{})
	go func() {
		defer unix.Close(dup)
		err := flock(dup, unix.LOCK_EX)
		select {
		case got <- err:
		case <-abandoned:
			if err == nil {
				_ = flock(dup, unix.LOCK_UN)
			}
			s.gate.leave()
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			return false, fmt.Errorf("sqlitestore: %s: locking %s: %w: %w", op, f.side.Name(), store.ErrUnavailable, err)
		}
		return false, nil
	case <-ctx.Done():
		err = fmt.Errorf("sqlitestore: %s: waiting for another process's write: %w: %w", op, store.ErrUnavailable, ctx.Err())
	case <-s.done:
		err = fmt.Errorf("sqlitestore: %s: store is closed: %w", op, store.ErrUnavailable)
	}
	select {
	case e := <-got: // it came as we gave up
		if e == nil {
			_ = flock(fd, unix.LOCK_UN)
		}
		return false, err
	default:
		close(abandoned)
		return true, err
	}
}

// unlockWriter releases the flock.
func (s *Store) unlockWriter(f *dbFile) {
	if f.side != nil {
		_ = flock(int(f.side.Fd()), unix.LOCK_UN)
	}
}

// flock is flock(2), retried when a signal interrupts it.
func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}
