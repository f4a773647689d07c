// Package poll waits in tests for a condition that becomes true on its own
// time: a slot that confirms, a record that lands, a metric that moves.
// A wait that runs out fails with the last thing it saw.
//
// Internal: for walrelay's tests only.
package poll

import (
	"testing"
	"time"
)

// Interval is how often Eventually checks.
const Interval = 20 * time.Millisecond

// Eventually calls check every Interval until it reports ok, and fails the
// test when within passes first, as "got <what check last saw> after
// <within>; want <want>". check runs on the test's goroutine and may
// itself end the test (when a process it watches has exited, say).
func Eventually(t testing.TB, within time.Duration, want string, check func() (got string, ok bool)) {
	t.Helper()
	EventuallyEvery(t, within, Interval, want, check)
}

// EventuallyEvery is Eventually checking every interval (a query that
// should not run in a tight loop, say).
func EventuallyEvery(t testing.TB, within, interval time.Duration, want string, check func() (got string, ok bool)) {
	t.Helper()
	var got string
	if !Until(within, interval, func() bool {
		var ok bool
		got, ok = check()
		return ok
	}) {
		t.Fatalf("got %s after %s; want %s", got, within, want)
	}
}

// Until calls cond every interval until it returns true or within passes,
// and reports whether it returned true. cond is called at least once, and
// once more at the deadline. For waits that fail their own way or not at
// all (a cleanup, a retry of a best-effort step).
func Until(within, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(interval, left))
	}
}

// EventuallyTrue is Eventually for a condition with nothing to show but
// whether it holds.
func EventuallyTrue(t testing.TB, within time.Duration, want string, cond func() bool) {
	t.Helper()
	EventuallyEvery(t, within, Interval, want, func() (string, bool) { return "not yet", cond() })
}
