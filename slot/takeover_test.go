package slot_test

import (
	"testing"
	"time"
)

// With TakeOver, a stream ends the walsender of the slot's current reader
// (a stale leader, for walrelay) instead of waiting for it to time out, and
// the old reader's stream fails.
func TestStreamTakesOverAnActiveSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	initial := f.initSlot()
	cfg := f.config()
	a := startRun(t, cfg, 1024)
	a.start(10 * time.Second)

	cfg.TakeOver = true
	cfg.ActiveRetryMin, cfg.ActiveRetryMax = 100*time.Millisecond, 300*time.Millisecond
	began := time.Now()
	b := startRun(t, cfg, 1024)
	if got := b.start(10 * time.Second); got != initial.ConfirmedFlush {
		t.Errorf("stream B's KindStart position: got %s; want %s", got, initial.ConfirmedFlush)
	}
	t.Logf("stream B took the slot over in %s", time.Since(began))
	a.closeDrained()
	if err := a.result(10 * time.Second); err == nil {
		t.Error("stream A after losing the slot: Run returned nil; want the error of its terminated connection")
	}
}
