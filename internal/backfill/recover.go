package backfill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/internal/leader"
	"github.com/walrelay/walrelay/internal/topics"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// RecoverConfig is one run of `walrelay recover`.
type RecoverConfig struct {
	Publishing
	// Options select the rows: exactly one of Since, SinceMessageID and
	// All, with Margin and Force.
	Options
	// Schema names the outbox table and walrelay's tables beside it: the
	// dead-letter table (parked rows, and what holds a key back) and the
	// topics table (the partition counts the gap is routed by).
	Schema schema.Config
	// MoreSchemas are the slot's further outbox tables, in the order of
	// Publishing.More: each parks into its own dead-letter table.
	MoreSchemas []schema.Config
	// Slot is the slot to replace, and the connection to PostgreSQL;
	// Slot.Recoveries is where the recovery is marked pending.
	Slot slot.Config
	// Leader is the slot's leader lock, held while recovering.
	Leader leader.Config
	// Park parks a row that cannot be published in the dead-letter table;
	// otherwise it stops the recovery.
	Park bool
	// Tables creates walrelay's tables on conn, as `walrelay init` does,
	// before anything else is touched.
	Tables func(ctx context.Context, conn *pgx.Conn) error
	// CheckTimeout bounds the checks before the lock is taken. Defaults to
	// 30s.
	CheckTimeout time.Duration
}

// Recovered is what a recovery did: Summary says it in a line.
type Recovered struct {
	Result
	// Slot is the recovered slot; DeadLetters the table rows were parked
	// in.
	Slot        string
	DeadLetters schema.Table
	// MoreDeadLetters are the further tables' (RecoverConfig.MoreSchemas).
	MoreDeadLetters []schema.Table
	// Since is the time selected (Options.Since, or the message's); zero
	// with Options.All.
	Since time.Time
	// From is the first occurred_at read: Since minus the margin, or a
	// pending recovery's own when earlier; nil when every row was read.
	From *time.Time
	// Streams is the new slot's consistent point, where it streams from.
	Streams pglogrepl.LSN
}

// Recover replaces the slot with a new one that exports a snapshot, and
// publishes the rows of the gap from the table as of that snapshot, under
// the slot's leader lock, with the recovery marked pending in
// PostgreSQL until Kafka has every row. See docs/RUNBOOK.md
// (WalrelaySlotLost) and DECISIONS 32.
func Recover(ctx context.Context, cfg RecoverConfig, log *zap.Logger) (Recovered, error) {
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 30 * time.Second
	}
	r, err := newRecovery(ctx, cfg, log)
	if err != nil {
		return Recovered{}, err
	}
	defer r.pool.Close()
	if err := r.prepare(ctx); err != nil {
		return Recovered{}, err
	}
	res, err := r.lead(ctx)
	if err != nil {
		return Recovered{}, err
	}
	rec := Recovered{Result: res, Slot: cfg.Slot.Slot, DeadLetters: cfg.Schema.DeadLetterTable(),
		Since: r.since, From: r.from, Streams: r.newSlot.ConsistentPoint}
	for _, sc := range cfg.MoreSchemas {
		rec.MoreDeadLetters = append(rec.MoreDeadLetters, sc.DeadLetterTable())
	}
	return rec, nil
}

// recovery is one run of Recover.
type recovery struct {
	cfg    RecoverConfig
	log    *zap.Logger
	pool   *pgxpool.Pool // the marker, the read transaction and the dead-letter table
	stores []*dlq.Store  // each table's dead letters, in the order of Message.Table
	table  schema.Table  // the recoveries table
	// since and from are Recovered's.
	since   time.Time
	from    *time.Time
	pending *slot.Recovery
	slotAt  slot.Figures
	newSlot *slot.Snapshot
}

func newRecovery(ctx context.Context, cfg RecoverConfig, log *zap.Logger) (*recovery, error) {
	r := &recovery{cfg: cfg, log: log, table: cfg.Slot.Recoveries}
	var err error
	if r.pool, err = slot.OpenPool(cfg.Slot, 4); err != nil {
		return nil, err
	}
	for _, sc := range append([]schema.Config{cfg.Schema}, cfg.MoreSchemas...) {
		st, err := dlq.New(r.pool, sc.DeadLetterTable())
		if err != nil {
			r.pool.Close()
			return nil, err
		}
		r.stores = append(r.stores, st)
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
	var err error
	r.since, r.from, err = r.cfg.Options.since(time.Now(), func() (time.Time, error) {
		return messageTime(ctx, r.pool, r.cfg.Schema, r.cfg.SinceMessageID)
	})
	return err
}

// since is the time selected and the first occurred_at to read (nil:
// every row), messageTime reading the time of --since-message-id.
func (o Options) since(now time.Time, messageTime func() (time.Time, error)) (time.Time, *time.Time, error) {
	given := 0
	for _, set := range []bool{o.Since != "", o.SinceMessageID != "", o.All} {
		if set {
			given++
		}
	}
	if given != 1 {
		return time.Time{}, nil, errors.New("give exactly one of --since TIME, --since-message-id ID or --all: which outbox rows to publish")
	}
	var since time.Time
	var err error
	switch {
	case o.Since != "":
		since, err = ParseWhen("--since", o.Since, now)
	case o.SinceMessageID != "":
		since, err = messageTime()
	}
	if err != nil || o.All {
		return since, nil, err
	}
	if o.Margin < 0 {
		return since, nil, fmt.Errorf("--margin is %s; want 0 or more", o.Margin)
	}
	from := since.Add(-o.Margin)
	return since, &from, nil
}

// prepare does what init does (the publication, the dead-letter and
// recoveries tables), checks Kafka, and refuses while another walrelay
// leads the slot.
func (r *recovery) prepare(ctx context.Context) error {
	checkCtx, cancel := context.WithTimeout(ctx, r.cfg.CheckTimeout)
	defer cancel()
	if _, err := slot.PrepareRecovery(checkCtx, r.cfg.Slot, r.log, r.cfg.Tables); err != nil {
		return err
	}
	if err := r.refuseHeld(checkCtx); err != nil {
		return err
	}
	return r.cfg.ping(checkCtx)
}

// refuseHeld fails when a process holds the slot's leader lock: a
// `walrelay run` streams it, and replacing its slot under it would be
// wrong either way.
func (r *recovery) refuseHeld(ctx context.Context) error {
	h, found, err := leader.FindHolder(ctx, r.pool, r.cfg.Slot.Slot)
	if err != nil || !found {
		return err
	}
	return fmt.Errorf("another walrelay leads slot %q (pid %d, application %q, client %q): stop every walrelay of the slot before recovering it",
		r.cfg.Slot.Slot, h.PID, h.ApplicationName, h.ClientAddr)
}

// lead takes the leader lock and recovers while holding it: the decision
// is taken there, so that no `walrelay run` can start streaming between
// the look at the slot and its replacement.
func (r *recovery) lead(ctx context.Context) (Result, error) {
	el, err := leader.New(r.cfg.Leader, r.log, prometheus.NewRegistry())
	if err != nil {
		return Result{}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var res Result
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
func (r *recovery) recover(ctx context.Context, guard func() error) (Result, error) {
	if err := r.decide(ctx); err != nil {
		return Result{}, err
	}
	if err := slot.BeginRecovery(ctx, r.pool, r.table, r.marker()); err != nil {
		return Result{}, err
	}
	var err error
	if r.newSlot, err = slot.CreateWithSnapshot(ctx, r.cfg.Slot, r.log); err != nil {
		return Result{}, err
	}
	defer r.newSlot.Close(context.WithoutCancel(ctx)) //nolint:errcheck // the snapshot was imported or is of no use
	if err := slot.SetRecoveryLSN(ctx, r.pool, r.table, r.cfg.Slot.Slot, r.newSlot.ConsistentPoint); err != nil {
		return Result{}, err
	}
	res, err := r.publish(ctx, guard)
	if err != nil {
		return res, fmt.Errorf("recover slot %q: %w (the recovery stays pending: run walrelay recover again, which publishes the rows again from the start)", r.cfg.Slot.Slot, err)
	}
	return res, slot.FinishRecovery(ctx, r.pool, r.table, r.cfg.Slot.Slot, res.Published, res.Parked)
}

// decide reads the slot and the last recovery under the lock, refuses to
// replace a usable slot without a reason, and widens the selection to a
// pending recovery's.
func (r *recovery) decide(ctx context.Context) error {
	var err error
	if r.slotAt, err = slot.ReadFigures(ctx, r.pool, r.cfg.Slot.Slot); err != nil {
		return err
	}
	last, found, err := slot.ReadRecovery(ctx, r.pool, r.table, r.cfg.Slot.Slot)
	if err != nil {
		return err
	}
	if found && last.Pending() {
		r.pending = &last
		r.log.Warn("an earlier recovery of the slot was not finished; this one takes over its rows too",
			zap.Timep("since", last.Since), zap.Time("started_at", last.StartedAt), zap.String("started_by", last.StartedBy))
		r.from = widen(r.from, last.Since)
	}
	usable := r.slotAt.Exists && !r.slotAt.Invalidated()
	switch {
	case !usable || r.pending != nil:
	case r.cfg.Force == "":
		return fmt.Errorf("slot %q is usable (wal_status %s, confirmed up to %s): walrelay run publishes everything after that position; "+
			"to publish older rows again without touching the slot use walrelay replay, or replace the slot with --force REASON",
			r.cfg.Slot.Slot, r.slotAt.WALStatus, r.slotAt.ConfirmedFlush)
	default:
		r.log.Warn("replacing a usable slot (--force)", zap.String("slot", r.cfg.Slot.Slot), zap.String("reason", r.cfg.Force),
			zap.Stringer("confirmed_flush_lsn", r.slotAt.ConfirmedFlush))
	}
	return nil
}

// widen is the first occurred_at to read when a pending recovery read
// from pending (nil: every row) and this one from from.
func widen(from, pending *time.Time) *time.Time {
	if pending == nil || from == nil {
		return nil
	}
	if pending.Before(*from) {
		return pending
	}
	return from
}

// marker is the pending recovery as the recoveries table keeps it.
func (r *recovery) marker() slot.Recovery {
	host, _ := os.Hostname()
	return slot.Recovery{
		Slot:        r.cfg.Slot.Slot,
		Since:       r.from,
		StartedBy:   fmt.Sprintf("%s pid %d", host, os.Getpid()),
		ForceReason: r.cfg.Force,
	}
}

// publish reads the selection in the new slot's snapshot and publishes it.
func (r *recovery) publish(ctx context.Context, guard func() error) (Result, error) {
	var blocked []schema.Blocker
	for i, st := range r.stores {
		bs, err := st.Blockers(ctx)
		if err != nil {
			return Result{}, err
		}
		for _, b := range bs {
			b.Table = i
			blocked = append(blocked, b)
		}
	}
	sc := r.cfg.Sink
	sc.Guard, sc.Blocked = guard, blocked
	// The gap goes by the partition counts the stream routes by.
	var err error
	if sc.Layouts, err = topics.New(r.pool, r.cfg.Schema.TopicsTable()); err != nil {
		return Result{}, err
	}
	if r.cfg.Park {
		sc.Park = func(ctx context.Context, dl schema.DeadLetter) (bool, error) {
			if dl.Table < 0 || dl.Table >= len(r.stores) {
				return false, fmt.Errorf("park %s: a row of table %d, of %d", dl.Position, dl.Table, len(r.stores))
			}
			return r.stores[dl.Table].Park(ctx, dl)
		}
	}
	cfg := Config{
		Decoder:     r.cfg.Decoder,
		More:        r.cfg.Publishing.More,
		Select:      Selection{Since: r.from},
		Snapshot:    r.newSlot.Name,
		Position:    r.newSlot.ConsistentPoint - 1,
		Sink:        sc,
		CountBefore: r.since,
		Verb:        "recover", Progress: r.cfg.Progress,
	}
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("connect for the read: %w", err)
	}
	defer conn.Release()
	r.log.Info("publishing the outbox rows of the new slot's snapshot", zap.Timep("from", r.from),
		zap.Stringer("consistent_point", r.newSlot.ConsistentPoint))
	return Run(ctx, conn.Conn(), cfg, r.log)
}

// Summary is the line `walrelay recover` ends with.
func (r Recovered) Summary() string {
	what := "every row"
	if r.From != nil {
		what = "the rows that occurred from " + r.From.UTC().Format(time.RFC3339)
		if !r.Since.IsZero() && r.From.Before(r.Since) {
			what += fmt.Sprintf(" (%s before --since)", r.Since.Sub(*r.From).Round(time.Second))
		}
	}
	dups := fmt.Sprintf("%d occurred before --since (most were in Kafka already: duplicates, which consumers drop by ce_id); ", r.Before)
	if r.Since.IsZero() {
		dups = "every row Kafka had already is a duplicate, which consumers drop by ce_id; "
	}
	dls := r.DeadLetters.String()
	for _, t := range r.MoreDeadLetters {
		dls += ", " + t.String()
	}
	if len(r.MoreDeadLetters) > 0 {
		what += fmt.Sprintf(" of %d tables", len(r.MoreDeadLetters)+1)
		dls = "their dead-letter tables (" + dls + ")"
	}
	return fmt.Sprintf("recovered slot %q: read %s, %d rows, in order of %s; %d published, %d parked in %s, in %s (%.0f rows/s); %s"+
		"the slot streams from %s: start walrelay run",
		r.Slot, what, r.Selected, r.Order, r.Published, r.Parked, dls,
		r.Took.Round(time.Millisecond), r.Rate(), dups, r.Streams)
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
