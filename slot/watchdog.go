package slot

import (
	"time"

	"github.com/jackc/pglogrepl"
)

// watchdog decides, from successive readings of the slot's figures, when
// the relay has stalled: the server's WAL has moved past the confirmed
// position, the confirmed position has not moved, and the relay has nothing
// in flight (so it is not waiting for Kafka: it is receiving nothing). A
// healthy idle relay confirms a keepalive or a heartbeat every few seconds,
// so the position of a live slot never stands still for long. Pure: the
// Monitor feeds it.
type watchdog struct {
	threshold time.Duration
	confirmed pglogrepl.LSN // confirmed_flush_lsn at the last reading
	since     time.Time     // first reading of the current standstill; zero when moving
	stalled   bool
}

// observe takes one reading and returns whether the verdict changed.
// streaming and idle describe this process's relay at the reading.
func (w *watchdog) observe(now time.Time, f Figures, streaming, idle bool) bool {
	still := f.Exists && f.ConfirmedFlush == w.confirmed
	w.confirmed = f.ConfirmedFlush
	if !(still && streaming && idle && f.CurrentWAL > f.ConfirmedFlush) {
		w.since = time.Time{}
	} else if w.since.IsZero() {
		w.since = now
	}
	stalled := !w.since.IsZero() && now.Sub(w.since) >= w.threshold
	changed := stalled != w.stalled
	w.stalled = stalled
	return changed
}

// standstill is how long the position has stood still, for the logs.
func (w *watchdog) standstill(now time.Time) time.Duration {
	if w.since.IsZero() {
		return 0
	}
	return now.Sub(w.since)
}
