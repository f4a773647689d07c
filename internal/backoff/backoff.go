// Package backoff is walrelay's one retry schedule and its one wait.
//
// A Policy is exponential backoff with full jitter: the ceiling of retry
// number n (0 for the first retry) is Min*2^n capped at Max, and the delay
// is drawn uniformly from [0, ceiling]. Full jitter spreads the retries of
// many clients that failed together (a broker restart, a failover) instead
// of keeping them in step, which a jitter over the upper half only does by
// half.
//
// Sleep is the one way walrelay waits between attempts: it returns early,
// with the context's error, when the context ends.
//
// Internal: walrelay's own, shared by its packages.
package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff with full jitter. The zero Policy waits
// nothing.
type Policy struct {
	// Min is the ceiling of the first retry's delay.
	Min time.Duration
	// Max caps the ceiling. Below Min it is taken as Min.
	Max time.Duration
	// Rand returns a value in [0, n) for n > 0. Defaults to math/rand/v2;
	// tests set it to make delays predictable.
	Rand func(n int64) int64
}

// Ceiling is the largest delay of retry number attempt (0 for the first):
// Min doubled attempt times, capped at Max.
func (p Policy) Ceiling(attempt int) time.Duration {
	limit := max(p.Max, p.Min)
	c := p.Min
	for i := 0; i < attempt && c < limit; i++ {
		if c > limit/2 { // doubling would pass the limit, or overflow
			return limit
		}
		c *= 2
	}
	return min(c, limit)
}

// Delay is the wait before retry number attempt (0 for the first): drawn
// uniformly from [0, Ceiling(attempt)].
func (p Policy) Delay(attempt int) time.Duration {
	c := p.Ceiling(attempt)
	if c <= 0 {
		return 0
	}
	rnd := p.Rand
	if rnd == nil {
		rnd = rand.Int64N
	}
	n := int64(c)
	if n < math.MaxInt64 {
		n++ // [0, c] inclusive
	}
	return time.Duration(rnd(n))
}

// Sleep waits d, or until ctx ends; then it returns ctx's error. A d of
// zero or less returns at once, with ctx's error if it has ended.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
