//go:build !linux

package main

import "time"

// burnClock is the wall clock: no thread CPU clock is read on this system
// (see benchburn_linux.go).
func burnClock() (clock func() time.Duration, done func()) { return wallClock() }
