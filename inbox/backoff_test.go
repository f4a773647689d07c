package inbox

import (
	"math"
	"testing"
	"time"
)

func TestBackoffStaysWithinItsBounds(t *testing.T) {
	for _, tc := range []struct{ min, max time.Duration }{
		{100 * time.Millisecond, 30 * time.Second},
		{time.Millisecond, time.Millisecond},
		{time.Second, math.MaxInt64},
	} {
		b := &backoff{min: tc.min, max: tc.max}
		prevCap := time.Duration(0)
		for i := range 80 {
			d := b.next()
			if d < tc.min || d > tc.max || d > b.cur {
				t.Fatalf("backoff(%s, %s) delay #%d = %s; want within [%s, %s]", tc.min, tc.max, i, d, tc.min, min(b.cur, tc.max))
			}
			if b.cur < prevCap {
				t.Fatalf("backoff(%s, %s): the cap fell from %s to %s", tc.min, tc.max, prevCap, b.cur)
			}
			prevCap = b.cur
		}
		if b.cur != tc.max {
			t.Errorf("backoff(%s, %s) after 80 attempts: cap %s; want %s", tc.min, tc.max, b.cur, tc.max)
		}
	}
}

func TestBackoffDoubles(t *testing.T) {
	b := &backoff{min: 100 * time.Millisecond, max: time.Second}
	var caps []time.Duration
	for range 6 {
		b.next()
		caps = append(caps, b.cur)
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i := range want {
		if caps[i] != want[i]*time.Millisecond {
			t.Fatalf("caps %v; want %v ms", caps, want)
		}
	}
}
