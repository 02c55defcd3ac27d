package main

import (
	"errors"

	"github.com/herdhq/herd/store"
)

// Exit statuses of herd, documented in the operator's guide. A script can
// tell a typo from a store that is down from a group that is not there.
const (
	exitOK          = 0   // done
	exitFailure     = 1   // anything not listed below
	exitUsage       = 2   // a bad flag, argument or environment variable
	exitCheckpoint  = 3   // herd checkpoint: the save was fenced (the partition moved)
	exitUnreachable = 4   // the store could not be reached or did not answer in time
	exitNotFound    = 5   // the group (or what was named) does not exist
	exitInUse       = 6   // the group has live members, or is a group of another kind
	exitUnhealthy   = 7   // herd status --check: partitions or keys not running
	exitInterrupted = 130 // SIGINT or SIGTERM before the command finished
)

// exitError carries the exit status a command wants for its error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withExit marks err so that herd exits with code; nil stays nil.
func withExit(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// exitCode is the status herd exits with for err: the code a command
// marked it with, or one read from the store's sentinel errors.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, store.ErrUnavailable):
		return exitUnreachable
	case errors.Is(err, store.ErrGroupInUse), errors.Is(err, store.ErrGroupKind):
		return exitInUse
	case errors.Is(err, store.ErrInvalid):
		return exitUsage
	}
	return exitFailure
}
