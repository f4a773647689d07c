package slot_test

import (
	"context"
	"testing"
	"time"

	"github.com/walrelay/walrelay/slot"
)

// The figures agree with the server: lag is the WAL written since the
// slot's confirmed position, retained WAL reaches back to restart_lsn, and
// a missing slot reads as not existing rather than as an error.
func TestReadFiguresAgreesWithServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	missing, err := slot.ReadFigures(ctx, f.conn, f.slot)
	if err != nil {
		t.Fatalf("ReadFigures of a missing slot: got %v; want nil", err)
	}
	if missing.Exists || missing.CurrentWAL == 0 {
		t.Fatalf("missing slot: got Exists=%v CurrentWAL=%s; want false and a position", missing.Exists, missing.CurrentWAL)
	}

	info := f.initSlot()
	for i := range 20 {
		f.insert("row " + string(rune('a'+i)))
	}
	before := f.queryLSN("SELECT pg_current_wal_lsn()::text")
	got, err := slot.ReadFigures(ctx, f.conn, f.slot)
	if err != nil {
		t.Fatalf("ReadFigures: got %v; want nil", err)
	}
	after := f.queryLSN("SELECT pg_current_wal_lsn()::text")
	if got.Info != f.slotInfo() || got.ConfirmedFlush != info.ConfirmedFlush {
		t.Errorf("Info: got %+v; want %+v (confirmed %s)", got.Info, f.slotInfo(), info.ConfirmedFlush)
	}
	if got.CurrentWAL < before || got.CurrentWAL > after {
		t.Errorf("CurrentWAL: got %s; want between %s and %s", got.CurrentWAL, before, after)
	}
	if want := uint64(got.CurrentWAL - info.ConfirmedFlush); got.LagBytes() != want || want == 0 {
		t.Errorf("LagBytes: got %d; want %d (> 0 after 20 inserts)", got.LagBytes(), want)
	}
	if got.RetainedBytes() < got.LagBytes() {
		t.Errorf("RetainedBytes: got %d; want at least the lag %d (restart_lsn <= confirmed_flush_lsn)", got.RetainedBytes(), got.LagBytes())
	}
	var keep int
	if err := f.conn.QueryRow(ctx, "SELECT setting::int FROM pg_settings WHERE name = 'max_slot_wal_keep_size'").Scan(&keep); err != nil {
		t.Fatalf("read max_slot_wal_keep_size: %v", err)
	}
	if (keep < 0) != (got.SafeWALSize == nil) {
		t.Errorf("SafeWALSize: got %v with max_slot_wal_keep_size=%d; want nil exactly when unlimited", got.SafeWALSize, keep)
	}
}
