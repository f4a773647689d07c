package main

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	const lo, hi = 100 * time.Millisecond, 2 * time.Second
	for _, c := range []struct {
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{1, 0, 50 * time.Millisecond},
		{1, 0.999999, 99999950 * time.Nanosecond},
		{2, 0, 100 * time.Millisecond},
		{3, 0.5, 300 * time.Millisecond},
		{5, 0, 800 * time.Millisecond},
		{6, 0, time.Second}, // 3.2s capped at 2s
		{6, 0.5, 1500 * time.Millisecond},
		{1000, 0, time.Second}, // no overflow
		{0, 0, 50 * time.Millisecond},
	} {
		if got := backoff(c.attempt, lo, hi, c.jitter); got != c.want {
			t.Errorf("backoff(%d, %s, %s, %v) = %s; want %s", c.attempt, lo, hi, c.jitter, got, c.want)
		}
	}
}

// The delay never shrinks from one attempt to the next, whatever the
// jitter: each attempt's least delay is the last one's greatest, until the
// cap.
func TestBackoffGrows(t *testing.T) {
	const lo, hi = 100 * time.Millisecond, time.Minute
	for a := 1; a < 40; a++ {
		if least, most := backoff(a+1, lo, hi, 0), backoff(a, lo, hi, 0.999999); least < most-time.Microsecond && least < hi/2 {
			t.Fatalf("attempt %d: least delay %s < previous attempt's greatest %s", a+1, least, most)
		}
		if got := backoff(a, lo, hi, 0.999999); got > hi {
			t.Fatalf("attempt %d: %s over the cap %s", a, got, hi)
		}
	}
}
