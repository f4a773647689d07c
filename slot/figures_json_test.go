package slot

import (
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// Rows as to_jsonb writes them: PostgreSQL 15 lacks the columns 16, 17 and
// 18 added; each server's row fills what it has.
func TestParseSlotRowOfEveryVersion(t *testing.T) {
	pg15 := `{"xmin": null, "active": true, "datoid": "16385", "plugin": "pgoutput", "database": "walrelay", "slot_name": "w", "slot_type": "logical", "temporary": false, "two_phase": false, "active_pid": 4242, "wal_status": "reserved", "restart_lsn": "0/16B3710", "catalog_xmin": "750", "safe_wal_size": 1048576, "confirmed_flush_lsn": "0/16B3748"}`
	pg18 := `{"xmin": null, "active": false, "datoid": "16385", "plugin": "pgoutput", "synced": true, "database": "walrelay", "failover": true, "slot_name": "jt", "slot_type": "logical", "temporary": false, "two_phase": false, "active_pid": null, "wal_status": "lost", "conflicting": false, "restart_lsn": null, "catalog_xmin": "2751", "two_phase_at": null, "safe_wal_size": null, "inactive_since": "2026-12-04T05:54:41.312651+00:00", "confirmed_flush_lsn": "0/1075E820", "invalidation_reason": "wal_removed"}`

	info, safe, err := parseSlotRow(pg15)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Exists || !info.Active || info.ActivePID != 4242 || info.ConfirmedFlush != pglogrepl.LSN(0x16B3748) || info.RestartLSN != pglogrepl.LSN(0x16B3710) ||
		info.WALStatus != "reserved" || safe == nil || *safe != 1<<20 {
		t.Errorf("15's row: got %+v, safe %v", info, safe)
	}
	if info.Failover || info.Conflicting || !info.InactiveSince.IsZero() || info.Synced || info.InvalidationReason != "" {
		t.Errorf("15's row: got failover %v, conflicting %v, inactive_since %v, synced %v, invalidation %q; want none (15 has no such columns)",
			info.Failover, info.Conflicting, info.InactiveSince, info.Synced, info.InvalidationReason)
	}

	info, safe, err = parseSlotRow(pg18)
	if err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 12, 4, 5, 54, 41, 312651000, time.UTC)
	if !info.Failover || !info.Synced || info.Conflicting ||
		info.InvalidationReason != "wal_removed" || info.InactiveSince != since ||
		info.RestartLSN != 0 || info.ActivePID != 0 || safe != nil {
		t.Errorf("18's row: got %+v, safe %v", info, safe)
	}

	for _, bad := range []string{`{"confirmed_flush_lsn": "nope"}`, `{"inactive_since": "yesterday"}`, `not json`} {
		if _, _, err := parseSlotRow(bad); err == nil {
			t.Errorf("parseSlotRow(%s): no error", bad)
		}
	}
}
