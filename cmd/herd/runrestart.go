package main

import (
	"math/rand/v2"
	"time"
)

// How herd run restarts a partition's child, and when it gives the
// partition back.

// streak counts the failures in a row of a partition's child, for
// --max-failures: a non-zero exit status, death by a signal, or a command
// that could not be started. An exit with status 0 ends the streak, and so
// does a run of longRun (--restart-max) or longer: a child that fails after
// running that long starts a new streak.
type streak struct {
	n       int           // failures in the current streak
	max     int           // give back at this many; 0: never
	longRun time.Duration // a run this long ends the streak
}

// exited records how a child ended (ok: exit status 0) after running for
// ran, and reports whether the partition is to be given back.
func (s *streak) exited(ok bool, ran time.Duration) bool {
	if ok || ran >= s.longRun {
		s.n = 0
	}
	if ok {
		return false
	}
	s.n++
	return s.max > 0 && s.n >= s.max
}

// backoff is the pause before start number n+1 after n exits in a row:
// restart-delay doubled n-1 times, at most restart-max, less up to a half
// at random so that children failing together do not restart together.
func (r *runner) backoff(n int) time.Duration {
	d := r.o.restartDelay
	for i := 1; i < n && d < r.o.restartMax; i++ {
		d *= 2
	}
	d = min(d, r.o.restartMax)
	return d/2 + rand.N(d/2+1)
}
