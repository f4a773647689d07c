package leader

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// ErrNotLeader is what Check returns while this process does not hold
// leadership. Every error from Check matches it with errors.Is.
var ErrNotLeader = errors.New("not the leader")

// ErrLeaseExpired is what Check returns when this process was leader but
// has not proven its lock for LeaseTimeout: it may have lost it unawares.
var ErrLeaseExpired = fmt.Errorf("%w: lease expired", ErrNotLeader)

// lease is the leader's permission to publish, read without locks by any
// goroutine and written by the elector's goroutine only. Times are kept as
// durations since epoch, so comparisons use the monotonic clock and a wall
// clock step cannot stretch a lease.
type lease struct {
	epoch   time.Time
	timeout time.Duration
	// deadline is the lease's end in nanoseconds since epoch; 0 means no
	// lease (it is never 0 otherwise: timeout > 0).
	deadline atomic.Int64
}

func newLease(timeout time.Duration) *lease {
	return &lease{epoch: time.Now(), timeout: timeout}
}

// renew grants the lease until timeout after sent, the moment the proof of
// the lock (the winning try or a check) was sent: the lock was certainly
// held then, not necessarily when the answer arrived.
func (l *lease) renew(sent time.Time) {
	l.deadline.Store(int64(sent.Sub(l.epoch) + l.timeout))
}

// revoke ends the lease at once.
func (l *lease) revoke() {
	l.deadline.Store(0)
}

// check tells whether the lease is valid at now.
func (l *lease) check(now time.Time) error {
	d := l.deadline.Load()
	if d == 0 {
		return ErrNotLeader
	}
	if int64(now.Sub(l.epoch)) >= d {
		return ErrLeaseExpired
	}
	return nil
}
