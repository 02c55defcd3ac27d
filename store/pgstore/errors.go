package pgstore

// Every call's frame: its checks, and the mapping of PostgreSQL's errors to the store's.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/herdhq/herd/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// checkContext is the first check of the exported calls that do not start
// with begin: a nil ctx is an invalid argument (it would panic, in Open on
// a pool goroutine no caller can recover).
func checkContext(ctx context.Context, op string) error {
	if ctx == nil {
		return fmt.Errorf("pgstore: %s: nil context (pass context.Background() or a call's own): %w", op, store.ErrInvalid)
	}
	return nil
}

// begin is store.Begin: args is the error of the store.Validate function
// of op, nil if valid.
func (s *Store) begin(ctx context.Context, op string, args error) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	return store.Begin(ctx, "pgstore", op, args, closed)
}

// do runs f, the statements of one operation. If the schema is missing
// (dropped while the store runs) it is created again and f retried once;
// a serialization failure or deadlock is retried up to three times (every
// operation is one transaction that either happened or did not).
func (s *Store) do(ctx context.Context, op string, f func(ctx context.Context) error) error {
	err := f(ctx)
	for attempt := 0; err != nil && attempt < 3; attempt++ {
		switch {
		case missingSchema(err) && attempt == 0:
			p, perr := s.probe(ctx)
			if e := s.ensureSchema(ctx, p, perr); e != nil {
				if errors.Is(e, store.ErrInvalid) {
					return e
				}
				return s.fail(op, e)
			}
		case pgCode(err) == "40001" || pgCode(err) == "40P01":
		default:
			return s.fail(op, err)
		}
		err = f(ctx)
	}
	return s.fail(op, err)
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// missingSchema: the schema, a table or a function is gone.
func missingSchema(err error) bool {
	switch pgCode(err) {
	case "3F000", "42P01", "42883":
		return true
	}
	return false
}

// fail maps a pgx error onto the store's sentinels: connection failures,
// timeouts, cancelled contexts and an overloaded or restarting server are
// store.ErrUnavailable. Other server errors are returned as they are.
func (s *Store) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	prefix := "pgstore: " + op
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "53"), strings.HasPrefix(pe.Code, "57P"),
			strings.HasPrefix(pe.Code, "58"), pe.Code == "25006", pe.Code == "57014", pe.Code == "55P03":
			// connection, resources, shutdown, system, read-only standby,
			// statement cancelled (a timeout), lock not available
			return s.wrap(prefix, err, store.ErrUnavailable)
		}
		return s.wrap(prefix, err, nil)
	}
	if !errors.Is(err, context.Canceled) {
		s.hub.suspect() // the network or the deadline failed the call (listen.go)
	}
	return s.wrap(prefix, err, store.ErrUnavailable)
}

// wrap makes the error prefix: [sentinel: ]err, with every secret
// redacted. The original error stays in the chain unless its message held
// a secret.
func (s *Store) wrap(prefix string, err error, sentinel error) error {
	msg := err.Error()
	clean := redactAll(msg, s.secrets)
	e := &opError{}
	if sentinel != nil {
		e.msg = prefix + ": " + sentinel.Error() + ": " + clean
		e.errs = append(e.errs, sentinel)
	} else {
		e.msg = prefix + ": " + clean
	}
	if clean == msg {
		e.errs = append(e.errs, err)
	}
	return e
}

type opError struct {
	msg  string
	errs []error
}

func (e *opError) Error() string   { return e.msg }
func (e *opError) Unwrap() []error { return e.errs }
