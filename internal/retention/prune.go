package retention

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// DB is what a Pruner needs of PostgreSQL: a *pgx.Conn or a *pgxpool.Pool,
// outside any transaction, so that every statement commits by itself.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Pruner deletes old, confirmed rows of one outbox table. It is not safe
// for concurrent use; two pruners of one table (two processes) are safe
// together, each deleting what the other has not.
type Pruner struct {
	cfg   Config
	db    DB
	log   *zap.Logger
	table string // quoted, schema-qualified
	// deleteSQL and countSQL take the cutoff ($1) and the mark's 32-bit
	// xmin as text ($2); deleteSQL also the batch size ($3).
	deleteSQL, countSQL string
}

// Result is what a run did.
type Result struct {
	Mark Mark
	// Confirmed is the slot's confirmed_flush_lsn that passed the mark.
	Confirmed pglogrepl.LSN
	// Deleted is the rows deleted; in a dry run, the rows that would be.
	Deleted int64
	// Batches is the DELETE statements that deleted at least one row; in a
	// dry run, how many it would take.
	Batches int
	// Partitions are the partitions dropped (Config.DropPartitions); in a
	// dry run, those that would be, whose rows Deleted then counts too.
	Partitions []Partition
	// Took is the whole run, the wait for the slot included.
	Took   time.Duration
	DryRun bool
	// KeptForRecovery is the slot's recovery (`walrelay recover`) when it
	// is pending, else nil. The rows it still needs were kept: Mark.Cutoff
	// is then no later than its Since, and with a nil Since (every row)
	// nothing was deleted.
	KeptForRecovery *slot.Recovery
}

// New returns a Pruner; it does not touch the database.
func New(cfg Config, db DB, log *zap.Logger) (*Pruner, error) {
	if db == nil {
		return nil, errors.New("retention: nil database")
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	p := &Pruner{cfg: cfg, db: db, log: log, table: cfg.Table.Quoted()}
	occ := schema.QuoteIdentifier(cfg.OccurredAt)
	// age() counts back from the same transaction id for both sides, so
	// the comparison holds across wraparound (see the package doc).
	match := occ + " < $1 AND age(xmin) > age($2::text::xid)"
	p.countSQL = "SELECT count(*) FROM " + p.table + " WHERE " + match
	// The outer WHERE repeats the match: a row that changed between the
	// two scans of the statement is deleted only if it still matches.
	p.deleteSQL = "DELETE FROM " + p.table + " WHERE ctid = ANY(ARRAY(SELECT ctid FROM " + p.table +
		" WHERE " + match + " LIMIT $3)) AND " + match
	return p, nil
}

// Run marks, waits for the slot to pass the mark, then deletes (or, in a
// dry run, counts) the rows the mark covers but for those a pending
// recovery of the slot still needs. On an error after some batches, the
// Result says what was deleted.
func (p *Pruner) Run(ctx context.Context) (Result, error) {
	start := time.Now()
	res := Result{DryRun: p.cfg.DryRun}
	done := func(err error) (Result, error) {
		res.Took = time.Since(start)
		return res, err
	}
	// A role that may not delete is told so before anything else: no
	// mark, no wait, no line saying that nothing was pruned.
	priv, err := ReadPrivileges(ctx, p.db, p.cfg.Table)
	if err != nil {
		return done(err)
	}
	if err := priv.refusal(p.cfg.Table, p.cfg.DryRun); err != nil {
		return done(err)
	}
	if p.cfg.DropPartitions && !p.cfg.DryRun && !priv.Owns && priv.Owner != "" {
		return done(fmt.Errorf("role %s %w: dropping partitions takes owning %s (its owner is %s); run walrelay prune --drop-partitions as the owner, or without --drop-partitions",
			priv.Role, ErrNoPrivilege, p.cfg.Table, priv.Owner))
	}
	if res.Mark, err = p.Mark(ctx); err != nil {
		return done(err)
	}
	p.warnWithoutIndex(ctx)
	if res.Confirmed, err = p.WaitConfirmed(ctx, res.Mark); err != nil {
		return done(p.whilePending(ctx, err))
	}
	if res.KeptForRecovery, err = p.pendingRecovery(ctx); err != nil {
		return done(err)
	}
	var some bool
	if res.Mark, some = spare(res.Mark, res.KeptForRecovery); !some {
		return done(nil) // the recovery needs every row
	}
	if p.cfg.DropPartitions {
		parts, why, err := p.OldPartitions(ctx, res.Mark)
		if err != nil {
			return done(err)
		}
		if why != "" {
			p.log.Warn("--drop-partitions: no partition is dropped, old rows are deleted row by row: "+why, zap.String("table", p.cfg.Table.String()))
		}
		if res.Partitions = parts; !p.cfg.DryRun && len(parts) > 0 {
			if res.Partitions, err = p.DropPartitions(ctx, parts); err != nil {
				return done(err)
			}
		}
	}
	if p.cfg.DryRun {
		res.Deleted, err = p.Count(ctx, res.Mark)
		res.Batches = int((res.Deleted + int64(p.cfg.Batch) - 1) / int64(p.cfg.Batch))
		return done(err)
	}
	res.Deleted, res.Batches, err = p.Delete(ctx, res.Mark)
	return done(err)
}

// markSQL reads the mark. pg_current_snapshot() is the statement's
// snapshot, taken before the statement runs; pg_current_wal_insert_lsn()
// is volatile, so it is evaluated while it runs: after the snapshot.
const markSQL = `SELECT pg_snapshot_xmin(pg_current_snapshot())::text, pg_current_wal_insert_lsn()::text,
	now() - $1::bigint * interval '1 microsecond', current_database(), to_regclass($2) IS NOT NULL`

// Mark reads the snapshot's xmin, then the WAL insert position, in one
// statement, and the cutoff on the server's clock. A missing table is an
// error.
func (p *Pruner) Mark(ctx context.Context) (Mark, error) {
	var m Mark
	var xmin string
	var exists bool
	err := p.db.QueryRow(ctx, markSQL, p.cfg.Retention.Microseconds(), p.table).
		Scan(&xmin, &m.InsertLSN, &m.Cutoff, &m.Database, &exists)
	if err != nil {
		return Mark{}, fmt.Errorf("read the prune mark: %w", err)
	}
	if !exists {
		return Mark{}, fmt.Errorf("outbox table %s does not exist", p.table)
	}
	if m.Xmin, err = strconv.ParseUint(xmin, 10, 64); err != nil {
		return Mark{}, fmt.Errorf("read the prune mark: snapshot xmin %q: %w", xmin, err)
	}
	p.log.Info("prune mark", zap.Uint64("xmin", m.Xmin), zap.Stringer("insert_lsn", m.InsertLSN),
		zap.Time("cutoff", m.Cutoff), zap.String("slot", p.cfg.Slot))
	return m, nil
}

// WaitConfirmed polls the slot until its confirmed_flush_lsn reaches the
// mark's insert position, and returns that position. After Config.Wait it
// returns a *NotConfirmedError; a missing, lost or foreign slot is an error
// at once.
func (p *Pruner) WaitConfirmed(ctx context.Context, m Mark) (pglogrepl.LSN, error) {
	start := time.Now()
	for {
		f, err := slot.ReadFigures(ctx, p.db, p.cfg.Slot)
		if err != nil {
			return 0, err
		}
		ok, err := passed(f, p.cfg.Slot, m.Database, m.InsertLSN)
		if err != nil {
			return 0, err
		}
		if ok {
			p.log.Info("slot passed the prune mark", zap.String("slot", p.cfg.Slot),
				zap.Stringer("confirmed_lsn", f.ConfirmedFlush), zap.Stringer("insert_lsn", m.InsertLSN),
				zap.Duration("waited", time.Since(start)))
			return f.ConfirmedFlush, nil
		}
		waited := time.Since(start)
		if waited >= p.cfg.Wait {
			return 0, &NotConfirmedError{Slot: p.cfg.Slot, Confirmed: f.ConfirmedFlush, Want: m.InsertLSN, Waited: waited}
		}
		if err := backoff.Sleep(ctx, min(p.cfg.PollInterval, p.cfg.Wait-waited)); err != nil {
			return 0, fmt.Errorf("wait for slot %q to pass %s: %w", p.cfg.Slot, m.InsertLSN, err)
		}
	}
}

// pendingRecovery returns the slot's recovery when it is pending, else nil.
// Run reads it only once the slot has passed the mark: `walrelay recover`
// marks its recovery pending before it replaces the slot, so a slot it
// created, whose position is past rows it has yet to publish, is never
// trusted without the mark being seen.
func (p *Pruner) pendingRecovery(ctx context.Context) (*slot.Recovery, error) {
	r, found, err := slot.ReadRecovery(ctx, p.db, p.cfg.Recoveries, p.cfg.Slot)
	if err != nil || !found || !r.Pending() {
		return nil, err
	}
	p.log.Info("keeping the rows a pending recovery of the slot needs", zap.Stringer("recovery", r))
	return &r, nil
}

// spare narrows m to spare the rows the pending recovery r needs, those
// with occurred_at at or after r.Since: deleting them would lose the
// messages the recovery has yet to publish. It returns false when r needs
// every row. A nil r leaves m as it is.
func spare(m Mark, r *slot.Recovery) (Mark, bool) {
	switch {
	case r == nil:
		return m, true
	case r.Since == nil:
		return m, false
	case r.Since.Before(m.Cutoff):
		m.Cutoff = *r.Since
	}
	return m, true
}

// whilePending adds to err, the slot not passing the mark, the slot's
// pending recovery if there is one: walrelay does not stream from the slot
// before the recovery is finished, so the slot does not move.
func (p *Pruner) whilePending(ctx context.Context, err error) error {
	r, found, rerr := slot.ReadRecovery(ctx, p.db, p.cfg.Recoveries, p.cfg.Slot)
	if rerr != nil || !found || !r.Pending() {
		return err
	}
	return fmt.Errorf("%w; a %s is pending: walrelay streams from the slot again once `walrelay recover` has finished it", err, r)
}

// Count returns how many rows the mark covers now.
func (p *Pruner) Count(ctx context.Context, m Mark) (int64, error) {
	var n int64
	if err := p.db.QueryRow(ctx, p.countSQL, m.Cutoff, m.xid32()).Scan(&n); err != nil {
		return 0, fmt.Errorf("count prunable rows of %s: %w", p.table, err)
	}
	return n, nil
}

// Delete deletes the rows the mark covers, in batches. The caller must
// have waited for the slot to pass the mark (WaitConfirmed). A batch once
// begun runs to its end; a cancelled ctx stops the run before the next
// one, with ctx's error.
func (p *Pruner) Delete(ctx context.Context, m Mark) (deleted int64, batches int, err error) {
	for {
		if err := ctx.Err(); err != nil {
			return deleted, batches, fmt.Errorf("prune stopped after %d rows: %w", deleted, err)
		}
		tag, err := p.db.Exec(context.WithoutCancel(ctx), p.deleteSQL, m.Cutoff, m.xid32(), p.cfg.Batch)
		if err != nil {
			return deleted, batches, fmt.Errorf("prune %s after %d rows: %w", p.table, deleted, err)
		}
		n := tag.RowsAffected()
		deleted += n
		if n > 0 {
			batches++
		}
		p.log.Debug("prune batch", zap.Int64("rows", n), zap.Int64("deleted", deleted), zap.Int("batches", batches))
		if n < int64(p.cfg.Batch) {
			return deleted, batches, nil
		}
		if err := backoff.Sleep(ctx, p.cfg.Pause); err != nil {
			return deleted, batches, fmt.Errorf("prune stopped after %d rows: %w", deleted, err)
		}
	}
}

// indexSQL reports whether an index of the table leads with the column.
const indexSQL = `SELECT EXISTS (SELECT 1 FROM pg_index i
	JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
	WHERE i.indrelid = $1::regclass AND a.attname = $2)`

// warnWithoutIndex logs a warning when no index leads with occurred_at:
// each batch then scans the table. It is advice; a failed look is ignored.
func (p *Pruner) warnWithoutIndex(ctx context.Context) {
	var ok bool
	if err := p.db.QueryRow(ctx, indexSQL, p.table, p.cfg.OccurredAt).Scan(&ok); err != nil || ok {
		return
	}
	p.log.Warn("no index on the occurred_at column: every prune batch scans the table; create it as `walrelay schema` does (CREATE INDEX CONCURRENTLY on a live table)",
		zap.String("table", p.cfg.Table.String()), zap.String("column", p.cfg.OccurredAt))
}
