package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backfill"
	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/internal/leader"
	"github.com/walrelay/walrelay/internal/topics"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// runRecover is `walrelay recover`: a new slot with an exported snapshot,
// and the rows of the gap published from the table as of that snapshot,
// under the leader lock, with a marker in PostgreSQL while it is pending.
// See docs/RUNBOOK.md (WalrelaySlotLost) and DECISIONS 32.
func runRecover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, log, ok, err := parseWithLogger("recover", args, stdout, stderr)
	if !ok {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr
	r, err := newRecovery(ctx, c, log, stderr)
	if err != nil {
		return err
	}
	defer r.pool.Close()
	if err := r.prepare(ctx); err != nil {
		return err
	}
	res, err := r.lead(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, r.summary(res))
	return nil
}

// recovery is one run of `walrelay recover`.
type recovery struct {
	c      config
	log    *zap.Logger
	stderr io.Writer
	pool   *pgxpool.Pool // the marker, the read transaction and the dead-letter table
	store  *dlq.Store
	table  schema.Table // the recoveries table
	// since is --since (or the message's time) as given; zero with --all.
	since time.Time
	// from is the first occurred_at read: since minus the margin, or a
	// pending recovery's own when earlier; nil reads every row.
	from    *time.Time
	pending *slot.Recovery
	slotAt  slot.Figures
	newSlot *slot.Snapshot
}

func newRecovery(ctx context.Context, c config, log *zap.Logger, stderr io.Writer) (*recovery, error) {
	if err := warnPostgresTLS(log, c.Slot.ConnString); err != nil {
		return nil, err
	}
	r := &recovery{c: c, log: log, stderr: stderr, table: c.Slot.Recoveries}
	var err error
	if r.pool, err = slot.OpenPool(c.Slot, 4); err != nil {
		return nil, err
	}
	if r.store, err = dlq.New(r.pool, c.Schema.DeadLetterTable()); err != nil {
		r.pool.Close()
		return nil, err
	}
	if err := r.resolveSince(ctx); err != nil {
		r.pool.Close()
		return nil, err
	}
	return r, nil
}

// resolveSince reads which of --since, --since-message-id and --all was
// given (exactly one must be).
func (r *recovery) resolveSince(ctx context.Context) error {
	b := r.c.Backfill
	given := 0
	for _, set := range []bool{b.Since != "", b.SinceMessageID != "", b.All} {
		if set {
			given++
		}
	}
	if given != 1 {
		return errors.New("give exactly one of --since TIME, --since-message-id ID or --all: which outbox rows to publish")
	}
	var err error
	switch {
	case b.Since != "":
		r.since, err = parseWhen("--since", b.Since, time.Now())
	case b.SinceMessageID != "":
		r.since, err = messageTime(ctx, r.pool, r.c.Schema, b.SinceMessageID)
	}
	if err != nil || b.All {
		return err
	}
	if b.Margin < 0 {
		return fmt.Errorf("--margin is %s; want 0 or more", b.Margin)
	}
	from := r.since.Add(-b.Margin)
	r.from = &from
	return nil
}

// prepare does what init does (the publication, the dead-letter and
// recoveries tables), checks Kafka, and refuses while another walrelay
// leads the slot.
func (r *recovery) prepare(ctx context.Context) error {
	checkCtx, cancel := context.WithTimeout(ctx, startCheckTimeout)
	defer cancel()
	tables := func(ctx context.Context, conn *pgx.Conn) error { return ensureTables(ctx, conn, r.c) }
	if _, err := slot.PrepareRecovery(checkCtx, r.c.Slot, r.log, tables); err != nil {
		return err
	}
	if err := r.refuseHeld(checkCtx); err != nil {
		return err
	}
	if discarding {
		return nil
	}
	return sink.Ping(checkCtx, r.c.Sink)
}

// refuseHeld fails when a process holds the slot's leader lock: a
// `walrelay run` streams it, and replacing its slot under it would be
// wrong either way.
func (r *recovery) refuseHeld(ctx context.Context) error {
	h, found, err := leader.FindHolder(ctx, r.pool, r.c.Slot.Slot)
	if err != nil || !found {
		return err
	}
	return fmt.Errorf("another walrelay leads slot %q (pid %d, application %q, client %q): stop every walrelay of the slot before recovering it",
		r.c.Slot.Slot, h.PID, h.ApplicationName, h.ClientAddr)
}

// lead takes the leader lock and recovers while holding it: the decision
// is taken there, so that no `walrelay run` can start streaming between
// the look at the slot and its replacement.
func (r *recovery) lead(ctx context.Context) (backfill.Result, error) {
	el, err := leader.New(r.c.Leader, r.log, prometheus.NewRegistry())
	if err != nil {
		return backfill.Result{}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var res backfill.Result
	done := false
	err = el.Run(runCtx, func(lctx context.Context) error {
		var err error
		res, err = r.recover(lctx, el.Check)
		if err == nil {
			// One term: the elector must not campaign again. An error
			// ends Run by itself, with that error.
			done = true
			stop()
		}
		return err
	})
	if err == nil && !done {
		err = ctx.Err()
		if err == nil {
			err = errors.New("recovery stopped before it was done")
		}
	}
	return res, err
}

// recover decides, marks, replaces the slot and publishes.
func (r *recovery) recover(ctx context.Context, guard func() error) (backfill.Result, error) {
	if err := r.decide(ctx); err != nil {
		return backfill.Result{}, err
	}
	if err := slot.BeginRecovery(ctx, r.pool, r.table, r.marker()); err != nil {
		return backfill.Result{}, err
	}
	var err error
	if r.newSlot, err = slot.CreateWithSnapshot(ctx, r.c.Slot, r.log); err != nil {
		return backfill.Result{}, err
	}
	defer r.newSlot.Close(context.WithoutCancel(ctx)) //nolint:errcheck // the snapshot was imported or is of no use
	if err := slot.SetRecoveryLSN(ctx, r.pool, r.table, r.c.Slot.Slot, r.newSlot.ConsistentPoint); err != nil {
		return backfill.Result{}, err
	}
	res, err := r.publish(ctx, guard)
	if err != nil {
		return res, fmt.Errorf("recover slot %q: %w (the recovery stays pending: run walrelay recover again, which publishes the rows again from the start)", r.c.Slot.Slot, err)
	}
	return res, slot.FinishRecovery(ctx, r.pool, r.table, r.c.Slot.Slot, res.Published, res.Parked)
}

// decide reads the slot and the last recovery under the lock, refuses to
// replace a usable slot without a reason, and widens the selection to a
// pending recovery's.
func (r *recovery) decide(ctx context.Context) error {
	var err error
	if r.slotAt, err = slot.ReadFigures(ctx, r.pool, r.c.Slot.Slot); err != nil {
		return err
	}
	last, found, err := slot.ReadRecovery(ctx, r.pool, r.table, r.c.Slot.Slot)
	if err != nil {
		return err
	}
	if found && last.Pending() {
		r.pending = &last
		r.log.Warn("an earlier recovery of the slot was not finished; this one takes over its rows too",
			zap.Timep("since", last.Since), zap.Time("started_at", last.StartedAt), zap.String("started_by", last.StartedBy))
		if last.Since == nil {
			r.from = nil
		} else if r.from != nil && last.Since.Before(*r.from) {
			r.from = last.Since
		}
	}
	usable := r.slotAt.Exists && !r.slotAt.Invalidated()
	switch {
	case !usable || r.pending != nil:
	case r.c.Backfill.Force == "":
		return fmt.Errorf("slot %q is usable (wal_status %s, confirmed up to %s): walrelay run publishes everything after that position; "+
			"to publish older rows again without touching the slot use walrelay replay, or replace the slot with --force REASON",
			r.c.Slot.Slot, r.slotAt.WALStatus, r.slotAt.ConfirmedFlush)
	default:
		r.log.Warn("replacing a usable slot (--force)", zap.String("slot", r.c.Slot.Slot), zap.String("reason", r.c.Backfill.Force),
			zap.Stringer("confirmed_flush_lsn", r.slotAt.ConfirmedFlush))
	}
	return nil
}

// marker is the pending recovery as the recoveries table keeps it.
func (r *recovery) marker() slot.Recovery {
	host, _ := os.Hostname()
	return slot.Recovery{
		Slot:        r.c.Slot.Slot,
		Since:       r.from,
		StartedBy:   fmt.Sprintf("%s pid %d", host, os.Getpid()),
		ForceReason: r.c.Backfill.Force,
	}
}

// publish reads the selection in the new slot's snapshot and publishes it.
func (r *recovery) publish(ctx context.Context, guard func() error) (backfill.Result, error) {
	blocked, err := r.store.Blockers(ctx)
	if err != nil {
		return backfill.Result{}, err
	}
	sc := r.c.Sink
	sc.Guard, sc.Blocked = guard, blocked
	// The gap goes by the partition counts the stream routes by.
	if sc.Layouts, err = topics.New(r.pool, r.c.Schema.TopicsTable()); err != nil {
		return backfill.Result{}, err
	}
	if r.c.Park {
		sc.Park = r.store.Park
	}
	cfg := backfill.Config{
		Decoder:     r.c.Decoder,
		Select:      backfill.Selection{Since: r.from},
		Snapshot:    r.newSlot.Name,
		Position:    r.newSlot.ConsistentPoint - 1,
		Sink:        sc,
		CountBefore: r.since,
		Verb:        "recover", Progress: r.stderr,
	}
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return backfill.Result{}, fmt.Errorf("connect for the read: %w", err)
	}
	defer conn.Release()
	r.log.Info("publishing the outbox rows of the new slot's snapshot", zap.Timep("from", r.from),
		zap.Stringer("consistent_point", r.newSlot.ConsistentPoint))
	return backfill.Run(ctx, conn.Conn(), cfg, r.log)
}

// summary is the line `walrelay recover` ends with.
func (r *recovery) summary(res backfill.Result) string {
	what := "every row"
	if r.from != nil {
		what = "the rows that occurred from " + r.from.UTC().Format(time.RFC3339)
		if !r.since.IsZero() && r.from.Before(r.since) {
			what += fmt.Sprintf(" (%s before --since)", r.since.Sub(*r.from).Round(time.Second))
		}
	}
	dups := fmt.Sprintf("%d occurred before --since (most were in Kafka already: duplicates, which consumers drop by ce_id); ", res.Before)
	if r.since.IsZero() {
		dups = "every row Kafka had already is a duplicate, which consumers drop by ce_id; "
	}
	return fmt.Sprintf("recovered slot %q: read %s, %d rows, in order of %s; %d published, %d parked in %s, in %s (%.0f rows/s); %s"+
		"the slot streams from %s: start walrelay run",
		r.c.Slot.Slot, what, res.Selected, res.Order, res.Published, res.Parked, r.c.Schema.DeadLetterTable(),
		res.Took.Round(time.Millisecond), res.Rate(), dups, r.newSlot.ConsistentPoint)
}

// messageTime is the occurred_at of the outbox row with message id id.
func messageTime(ctx context.Context, pool *pgxpool.Pool, sc schema.Config, id string) (time.Time, error) {
	if _, err := schema.ParseMessageID(id); err != nil {
		return time.Time{}, fmt.Errorf("--since-message-id: %w", err)
	}
	var t *time.Time
	err := pool.QueryRow(ctx, "SELECT "+schema.QuoteIdentifier(sc.Columns.OccurredAt)+" FROM "+sc.Table.Quoted()+
		" WHERE "+schema.QuoteIdentifier(sc.Columns.MessageID)+"::text = $1", id).Scan(&t)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return time.Time{}, fmt.Errorf("--since-message-id: no row of %s has message id %s (pruned already?): give --since TIME instead", sc.Table, id)
	case err != nil:
		return time.Time{}, fmt.Errorf("--since-message-id: read its %s: %w", sc.Columns.OccurredAt, err)
	case t == nil:
		return time.Time{}, fmt.Errorf("--since-message-id: message %s has no %s: give --since TIME instead", id, sc.Columns.OccurredAt)
	}
	return *t, nil
}

// parseWhen reads an RFC 3339 time, or a duration meaning that long before
// now.
func parseWhen(flag, s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%s is %q: want an RFC 3339 time (2026-12-04T08:00:00Z) or a duration ago (90m)", flag, s)
	}
	return now.Add(-d), nil
}
