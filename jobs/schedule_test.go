package jobs

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func TestEveryIsAlignedToTheEpoch(t *testing.T) {
	e := Every{time.Hour}
	for _, tc := range []struct{ at, want time.Time }{
		{t0, t0.Add(time.Hour)},
		{t0.Add(-time.Nanosecond), t0},
		{t0.Add(59 * time.Minute), t0.Add(time.Hour)},
		{time.Date(1960, 1, 1, 0, 30, 0, 0, time.UTC), time.Date(1960, 1, 1, 1, 0, 0, 0, time.UTC)},
		{t0.In(time.FixedZone("X", 5*3600+1800)), t0.Add(time.Hour)},
	} {
		if got := e.Next(tc.at); !got.Equal(tc.want) {
			t.Errorf("Every(1h).Next(%v) = %v; want %v", tc.at, got, tc.want)
		}
	}
	if got := (Every{7 * time.Minute}).Next(time.Unix(0, 0)); !got.Equal(time.Unix(420, 0)) {
		t.Errorf("Every(7m) from the epoch: %v", got)
	}
	if !(Every{}).Next(t0).IsZero() {
		t.Error("Every(0) has a next time")
	}
}

// Every key's slots are one per period, at the same offset in each, and
// next, latest and count agree with each other.
func TestSlotsSpread(t *testing.T) {
	cronDaily, err := ParseCron("0 6 * * *")
	if err != nil {
		t.Fatal(err)
	}
	// Periods of an hour and more: offsets are whole seconds, so 200 keys
	// in 10 minutes (600 offsets) would share some by chance.
	for _, sch := range []Schedule{Every{time.Hour}, cronDaily} {
		offsets := map[time.Duration]bool{}
		for i := range 200 {
			sl := newSlots(sch, fmt.Sprintf("city-%03d", i), true)
			a := sl.next(t0)
			b := sl.next(a)
			c := sl.next(b)
			if !a.After(t0) || !b.After(a) || !c.After(b) {
				t.Fatalf("%T: slots %v %v %v not increasing after %v", sch, a, b, c, t0)
			}
			if b.Sub(a) != c.Sub(b) {
				t.Fatalf("%T: slots not one period apart: %v %v %v", sch, a, b, c)
			}
			if got := sl.latest(b); !got.Equal(b) {
				t.Fatalf("%T: latest(%v) = %v", sch, b, got)
			}
			if got := sl.latest(b.Add(-time.Nanosecond)); !got.Equal(a) {
				t.Fatalf("%T: latest(just before %v) = %v; want %v", sch, b, got, a)
			}
			if got := sl.next(a.Add(-time.Nanosecond)); !got.Equal(a) {
				t.Fatalf("%T: next(just before %v) = %v", sch, a, got)
			}
			if n := sl.count(a, c); n != 2 {
				t.Fatalf("%T: count(%v, %v) = %d; want 2", sch, a, c, n)
			}
			base := sch.Next(a.Add(-b.Sub(a))) // the period's start
			offsets[a.Sub(base)] = true
		}
		if len(offsets) < 190 {
			t.Errorf("%T: 200 keys got only %d distinct offsets", sch, len(offsets))
		}
	}
}

// With spread, 10,000 keys due every hour are spread evenly over the hour.
func TestSpreadIsEven(t *testing.T) {
	const keys, buckets = 10000, 10
	var per [buckets]int
	for i := range keys {
		s := newSlots(Every{time.Hour}, fmt.Sprintf("tenant-%d", i), true).next(t0)
		// Offsets are whole seconds: a key with an offset under a second is
		// due at the hour, t0+1h, in the first bucket.
		per[int(s.Sub(t0)%time.Hour/(time.Hour/buckets))]++
	}
	for i, n := range per {
		if n < keys/buckets*8/10 || n > keys/buckets*12/10 {
			t.Errorf("bucket %d of the hour has %d of %d keys: %v", i, n, keys, per)
		}
	}
	if s := newSlots(Every{time.Hour}, "x", false).next(t0); !s.Equal(t0.Add(time.Hour)) {
		t.Errorf("without spread: %v", s)
	}
}

func TestCountEvery(t *testing.T) {
	sl := newSlots(Every{10 * time.Minute}, "k", true)
	a := sl.next(t0)
	day := sl.latest(a.Add(24 * time.Hour))
	if n := sl.count(a, day); n != 144 {
		t.Errorf("a day of 10-minute slots: %d", n)
	}
	c, _ := ParseCron("*/10 * * * *")
	cs := newSlots(c, "k", true)
	ca := cs.next(t0)
	if n := cs.count(ca, cs.latest(ca.Add(24*time.Hour))); n != 144 {
		t.Errorf("a day of */10 cron slots: %d", n)
	}
	m, _ := ParseCron("* * * * *")
	ms := newSlots(m, "k", true)
	ma := ms.next(t0)
	if n := ms.count(ma, ms.latest(ma.Add(30*24*time.Hour))); n != 30*24*60 {
		t.Errorf("30 days of minutely cron slots: %d", n)
	}
}

func TestParseCron(t *testing.T) {
	s, err := ParseCron("0 6 * * *")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(t0); !got.Equal(time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)) {
		t.Errorf("0 6 * * * is evaluated in %v, not UTC: %v", got.Location(), got)
	}
	p, err := ParseCron("CRON_TZ=Asia/Tokyo 0 6 * * *")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	if got := p.Next(t0); !got.Equal(time.Date(2026, 11, 23, 21, 0, 0, 0, time.UTC)) {
		t.Errorf("CRON_TZ=Asia/Tokyo 0 6: %v", got.UTC())
	}
	for _, bad := range []struct{ expr, want string }{
		{"", "empty"},
		{"TZ=UTC", "nothing else"},
		{"CRON_TZ=Nowhere/Land 0 6 * * *", "bad location"},
		{"@every 5m", "@every is not supported"},
		{"0 6 * *", "expected exactly 5 fields"},
		{"61 * * * *", "above maximum"},
		{"0 0 30 2 *", "never due"},
		{"@sometimes", "unrecognized descriptor"},
	} {
		if _, err := ParseCron(bad.expr); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseCron(%q) = %v; want an error with %q", bad.expr, err, bad.want)
		}
	}
}
