package inbox

import (
	"math"
	"testing"
	"time"
)

// The inbox retries with backoff.Policy (full jitter, tested in backoff/):
// these pin the inbox's use of it, from RetryBackoffMin to RetryBackoffMax.
func TestBackoffStaysWithinItsBounds(t *testing.T) {
	for _, tc := range []struct{ min, max time.Duration }{
		{100 * time.Millisecond, 30 * time.Second},
		{time.Millisecond, time.Millisecond},
		{time.Second, math.MaxInt64},
	} {
		in := &Inbox{c: Config{RetryBackoffMin: tc.min, RetryBackoffMax: tc.max}}
		p := in.retryPolicy()
		prevCap := time.Duration(0)
		for i := range 80 {
			d, ceiling := p.Delay(i), p.Ceiling(i)
			if d < 0 || d > tc.max || d > ceiling {
				t.Fatalf("backoff(%s, %s) delay #%d = %s; want within [0, %s]", tc.min, tc.max, i, d, min(ceiling, tc.max))
			}
			if ceiling < prevCap {
				t.Fatalf("backoff(%s, %s): the cap fell from %s to %s", tc.min, tc.max, prevCap, ceiling)
			}
			prevCap = ceiling
		}
		if prevCap != tc.max {
			t.Errorf("backoff(%s, %s) after 80 attempts: cap %s; want %s", tc.min, tc.max, prevCap, tc.max)
		}
	}
}

func TestBackoffDoubles(t *testing.T) {
	in := &Inbox{c: Config{RetryBackoffMin: 100 * time.Millisecond, RetryBackoffMax: time.Second}}
	p := in.retryPolicy()
	var caps []time.Duration
	for i := range 6 {
		caps = append(caps, p.Ceiling(i))
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i := range want {
		if caps[i] != want[i]*time.Millisecond {
			t.Fatalf("caps %v; want %v ms", caps, want)
		}
	}
}
