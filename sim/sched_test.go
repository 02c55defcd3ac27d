package sim

import (
	"slices"
	"testing"
	"time"
)

func TestSchedulerOrder(t *testing.T) {
	s := NewScheduler()
	var got []string
	s.At(3*time.Second, func() { got = append(got, "c") })
	s.At(time.Second, func() { got = append(got, "a1") })
	s.At(time.Second, func() { got = append(got, "a2") }) // same time: in scheduling order
	cancelled := s.At(2*time.Second, func() { got = append(got, "cancelled") })
	s.At(2*time.Second, func() {
		got = append(got, "b")
		s.After(0, func() { got = append(got, "b-now") })
		s.After(500*time.Millisecond, func() { got = append(got, "b+0.5") })
		s.After(time.Hour, func() { got = append(got, "late") })
	})
	if !cancelled.Stop() || cancelled.Stop() {
		t.Fatal("Stop: want true once, then false")
	}
	s.RunUntil(3 * time.Second)
	want := []string{"a1", "a2", "b", "b-now", "b+0.5", "c"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if s.Now() != 3*time.Second || s.Pending() != 1 {
		t.Fatalf("now %v pending %d, want 3s and 1", s.Now(), s.Pending())
	}
	s.At(0, func() { got = append(got, "past") }) // in the past: runs now
	s.RunUntil(3 * time.Second)
	if got[len(got)-1] != "past" {
		t.Fatalf("an event scheduled in the past did not run at once: %v", got)
	}
}

type recordingDriver struct{ ts []time.Duration }

func (d *recordingDriver) AdvanceTo(t time.Duration) { d.ts = append(d.ts, t) }

func TestSchedulerDriver(t *testing.T) {
	s := NewScheduler()
	d := &recordingDriver{}
	s.SetDriver(d)
	s.At(time.Second, func() {})
	s.At(time.Second, func() {})
	s.At(2*time.Second, func() {})
	s.RunUntil(5 * time.Second)
	want := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second}
	if !slices.Equal(d.ts, want) {
		t.Fatalf("driver advanced to %v, want %v", d.ts, want)
	}
}
