package slot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backoff"
)

// Invalidated reports whether the slot exists but the server invalidated
// it (wal_status lost; PostgreSQL 16 and later also say why): it can never
// be streamed again.
func (f Figures) Invalidated() bool {
	return f.Exists && (f.WALStatus == "lost" || f.InvalidationReason != "" || f.Conflicting)
}

// PrepareRecovery does what Init does short of the slot: it judges the
// server, the role and the table (a standby is refused), and creates the
// missing publication, refusing on the first failure. It returns the
// slot's figures (Exists false when it is missing) for the caller to
// decide whether replacing the slot is right.
//
// prepare, when given, runs on the same connection after the publication,
// as Init's does.
func PrepareRecovery(ctx context.Context, cfg Config, log *zap.Logger, prepare ...func(context.Context, *pgx.Conn) error) (Figures, error) {
	conn, f, err := openPrepared(ctx, cfg, log, prepare)
	if err != nil {
		return Figures{}, err
	}
	conn.Close(context.WithoutCancel(ctx))
	return f.figures, nil
}

// Snapshot is a slot just created with an exported snapshot: the
// snapshot shows exactly the transactions that committed before the
// slot's consistent point, and the slot streams exactly those that commit
// after it. The snapshot can be imported (SET TRANSACTION SNAPSHOT) until
// Close; a transaction that imported it keeps it after that.
type Snapshot struct {
	// Name is the exported snapshot's name, for SET TRANSACTION SNAPSHOT.
	Name string
	// ConsistentPoint is where the new slot starts: its confirmed_flush_lsn.
	ConsistentPoint pglogrepl.LSN
	// conn is the replication connection that created the slot; the
	// snapshot lives while it stays open and idle.
	conn *pgconn.PgConn
}

// Close ends the replication connection, and with it the export.
func (s *Snapshot) Close(ctx context.Context) error {
	return s.conn.Close(ctx)
}

// dropWait bounds the wait for a stale reader of the slot to go after
// it was terminated.
const dropWait = 10 * time.Second

// CreateWithSnapshot drops cfg's slot when it exists, then creates it anew
// with an exported snapshot (on PostgreSQL 17 and later as a failover
// slot, as Init does). A reader still attached to the old slot is ended
// first: the caller holds the leader lock, so that reader is stale.
// Creating a logical slot waits for the transactions running at that
// moment to end; the log says so.
func CreateWithSnapshot(ctx context.Context, cfg Config, log *zap.Logger) (*Snapshot, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	conn, err := connect(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var versionNum int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&versionNum); err != nil {
		return nil, fmt.Errorf("read server_version_num: %w", err)
	}
	if err := dropSlot(ctx, conn, cfg.Slot, log); err != nil {
		return nil, err
	}
	pc, err := cfg.pgConfig(true)
	if err != nil {
		return nil, err
	}
	rconn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open replication connection to %s:%d: %w", pc.Host, pc.Port, err)
	}
	log.Info("creating the replication slot with an exported snapshot (waits for the transactions running now to end)",
		zap.String("slot", cfg.Slot))
	res, err := pglogrepl.ParseCreateReplicationSlot(rconn.Exec(ctx, createSlotCommand(cfg.Slot, versionNum)))
	if err != nil {
		rconn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("create replication slot %q with a snapshot: %w", cfg.Slot, err)
	}
	cp, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		rconn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("create replication slot %q: consistent point %q: %w", cfg.Slot, res.ConsistentPoint, err)
	}
	log.Info("created replication slot", zap.String("slot", cfg.Slot), zap.Stringer("consistent_point", cp),
		zap.String("snapshot", res.SnapshotName))
	return &Snapshot{Name: res.SnapshotName, ConsistentPoint: cp, conn: rconn}, nil
}

// createSlotCommand is CREATE_REPLICATION_SLOT with an exported snapshot in
// the grammar of the server's version: options in parentheses from 15 on
// (with FAILOVER from 17 on), the older keyword form before.
func createSlotCommand(slot string, versionNum int) string {
	q := `"` + slot + `"` // validated: a plain identifier
	switch {
	case versionNum >= failoverVersion:
		return "CREATE_REPLICATION_SLOT " + q + " LOGICAL pgoutput (SNAPSHOT 'export', FAILOVER true)"
	case versionNum >= 150000:
		return "CREATE_REPLICATION_SLOT " + q + " LOGICAL pgoutput (SNAPSHOT 'export')"
	}
	return "CREATE_REPLICATION_SLOT " + q + " LOGICAL pgoutput EXPORT_SNAPSHOT"
}

// dropSlot drops the slot if it exists, after ending a reader that still
// holds it.
func dropSlot(ctx context.Context, conn *pgx.Conn, slot string, log *zap.Logger) error {
	deadline := time.Now().Add(dropWait)
	for {
		f, err := ReadFigures(ctx, conn, slot)
		switch {
		case err != nil:
			return err
		case !f.Exists:
			return nil
		case f.Active && time.Now().After(deadline):
			return fmt.Errorf("replication slot %q is still in use by pid %d after %s: stop the process that reads it", slot, f.ActivePID, dropWait)
		case f.Active:
			log.Warn("ending the old slot's reader", zap.String("slot", slot), zap.Int32("active_pid", f.ActivePID))
			if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", f.ActivePID); err != nil {
				return fmt.Errorf("end the reader of slot %q (pid %d): %w", slot, f.ActivePID, err)
			}
			if err := backoff.Sleep(ctx, 200*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil && !isUndefinedObject(err) {
			if isSlotActive(err) {
				continue // a reader came back between the look and the drop
			}
			return fmt.Errorf("drop replication slot %q: %w", slot, err)
		}
		log.Warn("dropped the old replication slot", zap.String("slot", slot), zap.String("wal_status", f.WALStatus),
			zap.String("invalidation_reason", f.InvalidationReason), zap.Stringer("confirmed_flush_lsn", f.ConfirmedFlush))
		return nil
	}
}

// isUndefinedObject is "replication slot ... does not exist" (42704): it
// was dropped between the look and the drop.
func isUndefinedObject(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42704"
}
