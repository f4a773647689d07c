package slot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/schema"
)

// Recovery is a slot's last recovery, from the recoveries table
// (schema.Config.RecoveryTable): `walrelay recover` writes it before it
// replaces the slot and finishes it once every selected row is in Kafka.
// While it is pending, walrelay does not stream from the slot (the
// "recovery" rule) and `walrelay prune` keeps the rows it still needs.
type Recovery struct {
	Slot string
	// Since is the earliest occurred_at of the rows the recovery needs;
	// nil: every row.
	Since *time.Time
	// StartedAt is when the recovery was (last) begun, on the server's
	// clock.
	StartedAt time.Time
	// StartedBy is the host and pid of the recover process.
	StartedBy string
	// ForceReason is the reason given for replacing a usable slot; empty
	// when none was replaced.
	ForceReason string
	// ConsistentLSN is the new slot's consistent point: 0 until the slot
	// was created.
	ConsistentLSN pglogrepl.LSN
	// FinishedAt is nil while the recovery is pending.
	FinishedAt *time.Time
	// Published and Parked count the rows the recovery published and
	// parked, once it finished.
	Published, Parked int64
}

// Pending reports whether the recovery has not finished: its slot may then
// be past rows not yet published, which must stay in the outbox table and
// reach Kafka before anything the slot streams.
func (r Recovery) Pending() bool { return r.FinishedAt == nil }

// String says whose recovery it is, which rows it needs, and when and by
// whom it was started: recovery of slot "walrelay" (rows since
// 2025-03-01T12:00:00Z, started at 2025-03-02T07:30:00Z by host:4242).
func (r Recovery) String() string {
	rows := "every row"
	if r.Since != nil {
		rows = "rows since " + utc(*r.Since)
	}
	by := ""
	if r.StartedBy != "" {
		by = " by " + r.StartedBy
	}
	return fmt.Sprintf("recovery of slot %q (%s, started at %s%s)", r.Slot, rows, utc(r.StartedAt), by)
}

// utc formats t in RFC 3339, UTC, to the second.
func utc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Execer runs one statement; *pgx.Conn, *pgxpool.Pool and pgx.Tx are
// Execers.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// execQuerier looks up and creates: *pgx.Conn and *pgxpool.Pool are both.
type execQuerier interface {
	Execer
	Querier
}

// recoveryColumns are the columns ReadRecovery scans, in its order.
// consistent_lsn reads 0/0 while NULL: no record starts there.
const recoveryColumns = `slot_name, since, started_at, coalesce(started_by, ''), coalesce(force_reason, ''),
	coalesce(consistent_lsn, '0/0')::text, finished_at, coalesce(published, 0), coalesce(parked, 0)`

// ReadRecovery reads slot's last recovery; found is false when there is
// none or the table does not exist (walrelay from before the table, or
// recover never run). A table that exists but cannot be read is an error.
func ReadRecovery(ctx context.Context, q Querier, table schema.Table, slot string) (r Recovery, found bool, err error) {
	t, err := quotedRecoveries(table)
	if err != nil {
		return Recovery{}, false, err
	}
	var exists bool
	if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", t).Scan(&exists); err != nil {
		return Recovery{}, false, fmt.Errorf("look up recoveries table %s: %w", table, err)
	}
	if !exists {
		return Recovery{}, false, nil
	}
	row := q.QueryRow(ctx, "SELECT "+recoveryColumns+" FROM "+t+" WHERE slot_name = $1", slot)
	err = row.Scan(&r.Slot, &r.Since, &r.StartedAt, &r.StartedBy, &r.ForceReason, &r.ConsistentLSN, &r.FinishedAt, &r.Published, &r.Parked)
	if errors.Is(err, pgx.ErrNoRows) {
		return Recovery{}, false, nil
	}
	if err != nil {
		return Recovery{}, false, fmt.Errorf("read the recovery of slot %q from %s: %w", slot, table, err)
	}
	return r, true, nil
}

// EnsureRecoveryTable creates c's recoveries table (schema.RecoveryDDL)
// unless it exists (EnsureTable).
func EnsureRecoveryTable(ctx context.Context, conn execQuerier, c schema.Config) error {
	ddl, err := schema.RecoveryDDL(c)
	if err != nil {
		return err
	}
	return EnsureTable(ctx, conn, "recoveries table", c.RecoveryTable(), ddl)
}

// EnsureDeadLetterTable creates c's dead-letter table
// (schema.DeadLetterDDL) unless it exists (EnsureTable).
func EnsureDeadLetterTable(ctx context.Context, conn execQuerier, c schema.Config) error {
	ddl, err := schema.DeadLetterDDL(c)
	if err != nil {
		return err
	}
	return EnsureTable(ctx, conn, "dead-letter table", c.DeadLetterTable(), ddl)
}

// EnsureTopicsTable creates c's topics table (schema.TopicsDDL) unless it
// exists (EnsureTable).
func EnsureTopicsTable(ctx context.Context, conn execQuerier, c schema.Config) error {
	ddl, err := schema.TopicsDDL(c)
	if err != nil {
		return err
	}
	return EnsureTable(ctx, conn, "topics table", c.TopicsTable(), ddl)
}

// EnsureTable runs ddl, which creates the table t (what says which of
// walrelay's tables), unless t exists: then its owner made it, with the
// same DDL from `walrelay schema`. It looks first because a role without
// CREATE on the schema cannot even run CREATE TABLE IF NOT EXISTS.
func EnsureTable(ctx context.Context, conn execQuerier, what string, t schema.Table, ddl string) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", t.Quoted()).Scan(&exists); err != nil {
		return fmt.Errorf("look up %s %s: %w", what, t, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, ddl); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" {
			return fmt.Errorf("%s %s does not exist and this role may not create it (%s): have the outbox table's owner apply %s, or GRANT CREATE ON SCHEMA %s to the role",
				what, t, pe.Message, schema.GrantsForRole, schema.QuoteIdentifier(t.Schema))
		}
		return fmt.Errorf("create %s %s: %w", what, t, err)
	}
	return nil
}

// beginRecoverySQL writes a pending recovery over the slot's last one:
// started now, nothing created, published or finished yet.
const beginRecoverySQL = `INSERT INTO %s (slot_name, since, started_at, started_by, force_reason)
	VALUES ($1, $2, now(), NULLIF($3, ''), NULLIF($4, ''))
	ON CONFLICT (slot_name) DO UPDATE SET since = EXCLUDED.since, started_at = EXCLUDED.started_at,
		started_by = EXCLUDED.started_by, force_reason = EXCLUDED.force_reason,
		consistent_lsn = NULL, finished_at = NULL, published = NULL, parked = NULL`

// BeginRecovery marks r.Slot's recovery pending, with r's Since, StartedBy
// and ForceReason (the rest of r is ignored), replacing the slot's last
// recovery, pending or finished. The caller decides Since: a recovery that
// takes over a pending one must keep needing what that one needed.
func BeginRecovery(ctx context.Context, q Execer, table schema.Table, r Recovery) error {
	t, err := quotedRecoveries(table)
	if err != nil {
		return err
	}
	if _, err := q.Exec(ctx, fmt.Sprintf(beginRecoverySQL, t), r.Slot, r.Since, r.StartedBy, r.ForceReason); err != nil {
		return fmt.Errorf("mark the recovery of slot %q pending in %s: %w", r.Slot, table, err)
	}
	return nil
}

// SetRecoveryLSN records the consistent point of the slot the pending
// recovery of slot created.
func SetRecoveryLSN(ctx context.Context, q Execer, table schema.Table, slot string, lsn pglogrepl.LSN) error {
	return updatePending(ctx, q, table, slot, "record the consistent point of", "consistent_lsn = $2::text::pg_lsn", lsn.String())
}

// FinishRecovery marks slot's pending recovery finished, with the rows it
// published and parked: walrelay may stream from the slot again, and prune
// may delete the rows.
func FinishRecovery(ctx context.Context, q Execer, table schema.Table, slot string, published, parked int64) error {
	return updatePending(ctx, q, table, slot, "finish", "finished_at = now(), published = $2, parked = $3", published, parked)
}

// updatePending sets what set says on slot's pending recovery ($1 is the
// slot, args follow from $2); a slot without one is an error, which what
// names.
func updatePending(ctx context.Context, q Execer, table schema.Table, slot, what, set string, args ...any) error {
	t, err := quotedRecoveries(table)
	if err != nil {
		return err
	}
	tag, err := q.Exec(ctx, "UPDATE "+t+" SET "+set+" WHERE slot_name = $1 AND finished_at IS NULL", append([]any{slot}, args...)...)
	if err != nil {
		return fmt.Errorf("%s the recovery of slot %q in %s: %w", what, slot, table, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s the recovery of slot %q: %s holds no pending recovery of it", what, slot, table)
	}
	return nil
}

// quotedRecoveries validates the recoveries table's name and quotes it for
// SQL.
func quotedRecoveries(t schema.Table) (string, error) {
	if err := t.Validate("recoveries table"); err != nil {
		return "", err
	}
	return t.Quoted(), nil
}
