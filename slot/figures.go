package slot

import (
	"context"
	"errors"
	"fmt"

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

const figuresSQL = `SELECT s.slot_name IS NOT NULL, coalesce(s.plugin, ''), coalesce(s.slot_type, ''),
	s.database, coalesce(s.active, false), s.active_pid,
	s.confirmed_flush_lsn::text, s.restart_lsn::text, s.wal_status, s.safe_wal_size,
	pg_current_wal_lsn()::text
FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1`

// ReadFigures reads the figures of slot name. A missing slot is not an
// error: Exists is false and only CurrentWAL is set.
func ReadFigures(ctx context.Context, q Querier, name string) (Figures, error) {
	var (
		f         Figures
		db        *string
		pid       *int32
		confirmed *pglogrepl.LSN
		restart   *pglogrepl.LSN
		walStatus *string
	)
	err := q.QueryRow(ctx, figuresSQL, name).Scan(&f.Exists, &f.Plugin, &f.Type, &db, &f.Active, &pid,
		&confirmed, &restart, &walStatus, &f.SafeWALSize, &f.CurrentWAL)
	if errors.Is(err, pgx.ErrNoRows) {
		err = errors.New("no row") // the outer join always yields one
	}
	if err != nil {
		return Figures{}, fmt.Errorf("read figures of slot %q: %w", name, err)
	}
	f.Database = deref(db)
	f.ActivePID = deref(pid)
	f.ConfirmedFlush = deref(confirmed)
	f.RestartLSN = deref(restart)
	f.WALStatus = deref(walStatus)
	return f, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
