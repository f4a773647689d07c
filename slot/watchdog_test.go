package slot

import (
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

func TestWatchdog(t *testing.T) {
	type reading struct {
		at              time.Duration // since the start
		wal, confirmed  pglogrepl.LSN
		streaming, idle bool
		stalled         bool // the verdict after this reading
	}
	const threshold = 10 * time.Second
	tests := []struct {
		name     string
		readings []reading
	}{
		{"position moves", []reading{
			{0, 0x200, 0x100, true, true, false},
			{5 * time.Second, 0x300, 0x200, true, true, false},
			{15 * time.Second, 0x400, 0x300, true, true, false},
			{30 * time.Second, 0x500, 0x400, true, true, false},
		}},
		{"stands still while the WAL moves, nothing in flight", []reading{
			{0, 0x200, 0x100, true, true, false},
			{5 * time.Second, 0x300, 0x100, true, true, false},
			{14 * time.Second, 0x400, 0x100, true, true, false},
			{15 * time.Second, 0x500, 0x100, true, true, true},
			{20 * time.Second, 0x600, 0x600, true, true, false},
		}},
		{"waiting for Kafka is not a stall", []reading{
			{0, 0x200, 0x100, true, false, false},
			{5 * time.Second, 0x300, 0x100, true, false, false},
			{60 * time.Second, 0x400, 0x100, true, false, false},
		}},
		{"nothing written is not a stall", []reading{
			{0, 0x100, 0x100, true, true, false},
			{60 * time.Second, 0x100, 0x100, true, true, false},
		}},
		{"not streaming (a standby) is not a stall", []reading{
			{0, 0x200, 0x100, false, true, false},
			{60 * time.Second, 0x300, 0x100, false, true, false},
		}},
		{"a busy spell restarts the clock", []reading{
			{0, 0x200, 0x100, true, true, false},
			{8 * time.Second, 0x300, 0x100, true, false, false},
			{12 * time.Second, 0x400, 0x100, true, true, false},
			{21 * time.Second, 0x500, 0x100, true, true, false},
			{22 * time.Second, 0x500, 0x100, true, true, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := watchdog{threshold: threshold}
			start := time.Unix(1000, 0)
			var was bool
			for i, r := range tt.readings {
				f := Figures{Info: Info{Exists: true, ConfirmedFlush: r.confirmed}, CurrentWAL: r.wal}
				changed := w.observe(start.Add(r.at), f, r.streaming, r.idle)
				if w.stalled != r.stalled || changed != (was != r.stalled) {
					t.Fatalf("reading %d (%+v): got stalled=%v changed=%v; want stalled=%v changed=%v", i, r, w.stalled, changed, r.stalled, was != r.stalled)
				}
				was = r.stalled
			}
		})
	}
}
