package backoff

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

func TestCeilingDoublesUpToMax(t *testing.T) {
	p := Policy{Min: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for attempt, w := range want {
		if got := p.Ceiling(attempt); got != w*time.Millisecond {
			t.Errorf("Ceiling(%d) = %s; want %s", attempt, got, w*time.Millisecond)
		}
	}
	if got := p.Ceiling(1 << 20); got != time.Second {
		t.Errorf("Ceiling(huge) = %s; want the cap 1s", got)
	}
	unbounded := Policy{Min: time.Second, Max: math.MaxInt64}
	for attempt := range 80 {
		if got := unbounded.Ceiling(attempt); got < time.Second || got < unbounded.Ceiling(max(attempt-1, 0)) {
			t.Fatalf("Max math.MaxInt64: Ceiling(%d) = %s; want no overflow: at least 1s and never falling", attempt, got)
		}
		if d := unbounded.Delay(attempt); d < 0 {
			t.Fatalf("Max math.MaxInt64: Delay(%d) = %s; want >= 0", attempt, d)
		}
	}
	if got := (Policy{Min: time.Second, Max: time.Millisecond}).Ceiling(3); got != time.Second {
		t.Errorf("Max below Min: Ceiling = %s; want Min", got)
	}
}

// Full jitter: the delay spans the whole range [0, ceiling], not its
// upper half.
func TestDelayIsFullJitter(t *testing.T) {
	var asked int64
	low := Policy{Min: time.Second, Max: 8 * time.Second, Rand: func(n int64) int64 { asked = n; return 0 }}
	if got := low.Delay(2); got != 0 {
		t.Errorf("Delay with the lowest draw = %s; want 0", got)
	}
	if asked != int64(4*time.Second)+1 {
		t.Errorf("drew from [0, %d); want [0, 4s+1)", asked)
	}
	high := Policy{Min: time.Second, Max: 8 * time.Second, Rand: func(n int64) int64 { return n - 1 }}
	if got := high.Delay(10); got != 8*time.Second {
		t.Errorf("Delay with the highest draw = %s; want the cap 8s", got)
	}
	seen := map[bool]bool{}
	real := Policy{Min: time.Second, Max: time.Second}
	for range 200 {
		d := real.Delay(0)
		if d < 0 || d > time.Second {
			t.Fatalf("Delay = %s; want within [0, 1s]", d)
		}
		seen[d < 500*time.Millisecond] = true
	}
	if !seen[true] || !seen[false] {
		t.Errorf("200 delays all in one half of [0, 1s]; want both halves")
	}
	if got := (Policy{}).Delay(5); got != 0 {
		t.Errorf("zero Policy: Delay = %s; want 0", got)
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep(1ms) = %v; want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on an ended context = %v; want context.Canceled", err)
	}
	if time.Since(start) > time.Minute {
		t.Errorf("Sleep on an ended context waited")
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(0) on an ended context = %v; want context.Canceled", err)
	}
	if err := Sleep(context.Background(), -time.Second); err != nil {
		t.Errorf("Sleep(-1s) = %v; want nil", err)
	}
}
