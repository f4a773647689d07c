package slot

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Figures are the slot's numbers as the server sees them: its row of
// pg_replication_slots and the server's current WAL position, read in one
// query. The metrics, `walrelay status` and the stall watchdog use them.
type Figures struct {
	Info
	// CurrentWAL is pg_current_wal_lsn() when the figures were read.
	CurrentWAL pglogrepl.LSN
	// SafeWALSize is pg_replication_slots.safe_wal_size: the bytes of WAL
	// the server can still write before the slot's WAL is at risk of
	// removal (wal_status unreserved, then lost). Nil when the server keeps
	// WAL for slots without limit (max_slot_wal_keep_size = -1) or the slot
	// is lost.
	SafeWALSize *int64
}

// LagBytes is the WAL the slot has not confirmed yet: the server's current
// position minus confirmed_flush_lsn.
func (f Figures) LagBytes() uint64 { return distance(f.CurrentWAL, f.ConfirmedFlush) }

// RetainedBytes is the WAL the server keeps for the slot: the current
// position minus restart_lsn.
func (f Figures) RetainedBytes() uint64 { return distance(f.CurrentWAL, f.RestartLSN) }

func distance(to, from pglogrepl.LSN) uint64 {
	if from == 0 || to <= from {
		return 0
	}
	return uint64(to - from)
}

// Querier runs one query; *pgx.Conn and *pgxpool.Pool are Queriers.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// figuresSQL reads the slot's row whole, as JSON, so that one query serves
// every server: PostgreSQL 16 added conflicting, 17 invalidation_reason,
// inactive_since, synced and failover; a column the server lacks is
// absent from the JSON and its field stays zero. A standby reports the
// WAL it replayed as its position.
const figuresSQL = `SELECT (SELECT to_jsonb(s)::text FROM pg_replication_slots s WHERE s.slot_name = $1),
	(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text`

// slotRow is a pg_replication_slots row as to_jsonb writes it.
type slotRow struct {
	Plugin             *string `json:"plugin"`
	Type               string  `json:"slot_type"`
	Database           *string `json:"database"`
	Active             bool    `json:"active"`
	ActivePID          *int32  `json:"active_pid"`
	ConfirmedFlush     *string `json:"confirmed_flush_lsn"`
	RestartLSN         *string `json:"restart_lsn"`
	WALStatus          *string `json:"wal_status"`
	SafeWALSize        *int64  `json:"safe_wal_size"`
	Conflicting        *bool   `json:"conflicting"`
	InvalidationReason *string `json:"invalidation_reason"`
	InactiveSince      *string `json:"inactive_since"`
	Synced             *bool   `json:"synced"`
	Failover           *bool   `json:"failover"`
}

// ReadFigures reads the figures of slot name. A missing slot is not an
// error: Exists is false and only CurrentWAL is set.
func ReadFigures(ctx context.Context, q Querier, name string) (Figures, error) {
	var (
		f   Figures
		row *string
	)
	err := q.QueryRow(ctx, figuresSQL, name).Scan(&row, &f.CurrentWAL)
	if err != nil {
		return Figures{}, fmt.Errorf("read figures of slot %q: %w", name, err)
	}
	if row == nil {
		return f, nil
	}
	if f.Info, f.SafeWALSize, err = parseSlotRow(*row); err != nil {
		return Figures{}, fmt.Errorf("read figures of slot %q: %w", name, err)
	}
	return f, nil
}

// parseSlotRow turns the JSON of a pg_replication_slots row into Info.
func parseSlotRow(text string) (Info, *int64, error) {
	var r slotRow
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		return Info{}, nil, fmt.Errorf("parse pg_replication_slots row: %w", err)
	}
	info := Info{
		Exists: true, Plugin: deref(r.Plugin), Type: r.Type, Database: deref(r.Database),
		Active: r.Active, ActivePID: deref(r.ActivePID), WALStatus: deref(r.WALStatus),
		Conflicting: deref(r.Conflicting), InvalidationReason: deref(r.InvalidationReason),
		Synced: deref(r.Synced), Failover: deref(r.Failover),
	}
	var err error
	if info.ConfirmedFlush, err = parseLSN(r.ConfirmedFlush); err != nil {
		return Info{}, nil, err
	}
	if info.RestartLSN, err = parseLSN(r.RestartLSN); err != nil {
		return Info{}, nil, err
	}
	if r.InactiveSince != nil {
		t, err := time.Parse(time.RFC3339Nano, *r.InactiveSince)
		if err != nil {
			return Info{}, nil, fmt.Errorf("parse inactive_since %q: %w", *r.InactiveSince, err)
		}
		info.InactiveSince = t.UTC()
	}
	return info, r.SafeWALSize, nil
}

func parseLSN(s *string) (pglogrepl.LSN, error) {
	if s == nil {
		return 0, nil
	}
	lsn, err := pglogrepl.ParseLSN(*s)
	if err != nil {
		return 0, fmt.Errorf("parse LSN %q: %w", *s, err)
	}
	return lsn, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
