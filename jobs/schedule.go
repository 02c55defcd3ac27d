package jobs

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule gives the due times of a key. Next returns the first due time
// strictly after t, or the zero time if there is none. It must be a pure
// function of t: every member computes the same times from it, so it must
// not depend on the host's time zone or on when it is called.
// (*cron.SpecSchedule from github.com/robfig/cron/v3 is one.)
type Schedule interface {
	Next(t time.Time) time.Time
}

// Every is a Schedule due at every multiple of D since the Unix epoch
// (UTC): Every{time.Hour} is due on the hour. D must be positive.
type Every struct{ D time.Duration }

// Next returns the first multiple of D since the Unix epoch after t.
func (e Every) Next(t time.Time) time.Time {
	if e.D <= 0 {
		return time.Time{}
	}
	return e.prev(t).Add(e.D)
}

// prev returns the last multiple of D at or before t.
func (e Every) prev(t time.Time) time.Time {
	sec, nsec := t.Unix(), int64(t.Nanosecond())
	d := int64(e.D)
	// t as nanoseconds since the epoch may overflow int64 far from 1970;
	// compute (sec*1e9 + nsec) mod d without overflow.
	rem := (mulmod(sec, int64(time.Second), d) + nsec%d) % d
	if rem < 0 {
		rem += d
	}
	return t.Add(-time.Duration(rem)).UTC()
}

// mulmod returns (a*b) mod m for m > 0, without overflow, in -m < r < m.
func mulmod(a, b, m int64) int64 {
	neg := (a < 0) != (b < 0)
	ua, ub := uint64(abs(a)), uint64(abs(b))
	hi, lo := bits.Mul64(ua, ub)
	_, r := bits.Div64(hi%uint64(m), lo, uint64(m))
	if neg {
		return -int64(r)
	}
	return int64(r)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// ParseCron parses a standard five-field cron expression (minute hour
// day-of-month month day-of-week, with names, ranges, steps, and the
// descriptors @hourly, @daily, @weekly, @monthly, @yearly) with
// github.com/robfig/cron/v3. The expression is evaluated in UTC, so that
// every member computes the same times whatever its host's time zone,
// unless it starts with CRON_TZ=Zone (an IANA zone: CRON_TZ=Europe/Paris
// 0 6 * * *). In a zone with daylight saving time, a job at a fixed time
// runs once on the days the clocks change, as in Vixie cron: the repeated
// hour is collapsed in autumn, and a time in the hour skipped in spring
// runs at the change (see cronSchedule). "@every D" is refused: its times depend on when it is asked,
// so members would disagree; use Config.Every.
func ParseCron(expr string) (Schedule, error) {
	s := strings.TrimSpace(expr)
	if s == "" {
		return nil, fmt.Errorf("jobs: cron expression is empty")
	}
	hasTZ := strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=")
	if hasTZ && !strings.ContainsAny(s, " \t") {
		return nil, fmt.Errorf("jobs: cron expression %q has a time zone and nothing else", expr)
	}
	if strings.Contains(s, "@every") {
		return nil, fmt.Errorf("jobs: cron expression %q: @every is not supported "+
			"(its times depend on when it is asked, so members would disagree); use Every (herd jobs --every)", expr)
	}
	if hasTZ {
		// The parser splits at the first space only.
		tz, rest, _ := strings.Cut(strings.Replace(s, "\t", " ", 1), " ")
		s = tz + " " + strings.TrimSpace(rest)
	}
	sched, err := parseCron(s)
	if err != nil {
		return nil, fmt.Errorf("jobs: cron expression %q: %v", expr, err)
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("jobs: cron expression %q: not a calendar schedule", expr)
	}
	if !hasTZ {
		spec.Location = time.UTC
	}
	if spec.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() && spec.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("jobs: cron expression %q is never due (no time matches it)", expr)
	}
	fields := s
	if hasTZ {
		_, fields, _ = strings.Cut(s, " ")
	}
	return cronSchedule{spec: spec, fixed: fixedTime(fields)}, nil
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseCron calls the parser, turning a panic on odd input into an error.
func parseCron(s string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("malformed expression (%v)", r)
		}
	}()
	return cronParser.Parse(s)
}

// slots is a key's schedule with its spread: the due times ("slots") of
// the key. Each period of the schedule (from one of its times, the
// period's base, to the next) holds one slot, at a fraction of the period
// given by a hash of the key, so that keys due at the same times are spread
// evenly over the period instead of all starting at once. Without spread the
// fraction is 0 and the slots are the schedule's times.
type slots struct {
	s    Schedule
	frac uint64 // the slot's place in its period, as a fraction of 2^64
}

func newSlots(s Schedule, key string, spread bool) slots {
	sl := slots{s: s}
	if spread {
		sl.frac = keyHash(key)
	}
	return sl
}

// keyHash is a well-mixed 64-bit hash of key, the same on every member.
func keyHash(key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	x := h.Sum64()
	// splitmix64's finaliser: FNV's high bits alone are poorly mixed.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// slotOf returns the slot of the period that starts at base b (zero if the
// schedule has no time after b).
func (sl slots) slotOf(b time.Time) time.Time {
	return sl.slotIn(b, sl.s.Next(b))
}

// slotIn returns the slot of the period from base b to the next base n
// (zero if n is zero).
func (sl slots) slotIn(b, n time.Time) time.Time {
	if n.IsZero() {
		return time.Time{}
	}
	if sl.frac == 0 {
		return b
	}
	gap := n.Sub(b)
	if gap <= 0 {
		return b
	}
	off, _ := bits.Mul64(uint64(gap), sl.frac) // integer math: the same on every CPU
	// Whole seconds (milliseconds for periods under a second): a slot is
	// shown the same way everywhere ({slot}, HERD_SLOT, status), with no
	// nanoseconds of a hash in it.
	unit := time.Second
	if gap < time.Second {
		unit = time.Millisecond
	}
	return b.Add(time.Duration(off).Truncate(unit))
}

// maxLookBack bounds the search for a schedule's last time before t: a
// schedule with no time in the five years before t is treated as new.
const maxLookBack = 5 * 366 * 24 * time.Hour

// baseAtOrBefore returns the schedule's last time at or before t, or zero if
// there is none within maxLookBack.
func (sl slots) baseAtOrBefore(t time.Time) time.Time {
	if e, ok := sl.s.(Every); ok {
		if e.D <= 0 {
			return time.Time{}
		}
		return e.prev(t)
	}
	for d := time.Minute; d <= maxLookBack; d *= 2 {
		b := sl.s.Next(t.Add(-d))
		if b.IsZero() || b.After(t) {
			continue
		}
		for i := 0; i < 1_000_000; i++ { // a bound, against a schedule that never moves
			n := sl.s.Next(b)
			if n.IsZero() || n.After(t) || !n.After(b) {
				return b
			}
			b = n
		}
		return b
	}
	return time.Time{}
}

// next returns the first slot strictly after t (zero if none).
func (sl slots) next(t time.Time) time.Time {
	b := sl.baseAtOrBefore(t)
	if !b.IsZero() {
		if s := sl.slotOf(b); s.After(t) {
			return s
		}
	} else {
		b = t
	}
	// Slots grow with their bases, and the slot of a base after t is after t.
	for i := 0; i < 3; i++ {
		b = sl.s.Next(b)
		if b.IsZero() {
			return time.Time{}
		}
		if s := sl.slotOf(b); s.After(t) {
			return s
		}
	}
	return time.Time{}
}

// latest returns the last slot at or before t (zero if none is known).
func (sl slots) latest(t time.Time) time.Time {
	b := sl.baseAtOrBefore(t)
	if b.IsZero() {
		return time.Time{}
	}
	if s := sl.slotOf(b); !s.IsZero() && !s.After(t) {
		return s
	}
	pb := sl.baseAtOrBefore(b.Add(-1))
	if pb.IsZero() {
		return time.Time{}
	}
	return sl.slotOf(pb)
}

// maxCount bounds the slots counted one by one between two times.
const maxCount = 1_000_000

// count returns the number of slots in [from, to): the slots skipped when
// the run for to replaces the one for from. Exact for Every; for other
// schedules counted one by one, at most maxCount.
func (sl slots) count(from, to time.Time) uint64 {
	if !to.After(from) {
		return 0
	}
	if e, ok := sl.s.(Every); ok && e.D > 0 {
		// Every slot is one period after the one before.
		return uint64((to.Sub(from) + e.D - 1) / e.D)
	}
	// One slot per period: walk the periods from the one holding from.
	b := sl.baseAtOrBefore(from)
	if b.IsZero() {
		b = sl.s.Next(from)
	}
	var n uint64
	for !b.IsZero() && n < maxCount {
		next := sl.s.Next(b)
		s := sl.slotIn(b, next)
		if s.IsZero() || !s.Before(to) || !next.After(b) {
			break
		}
		if !s.Before(from) {
			n++
		}
		b = next
	}
	return n
}
