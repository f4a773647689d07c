package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/schema"
)

// Beginner opens a transaction in the consumer's database: *pgxpool.Pool and
// *pgx.Conn both do.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Handler applies a message's effect inside tx, the transaction that also
// records the message in the inbox. An error rolls both back.
type Handler func(ctx context.Context, tx pgx.Tx, m Message) error

// Config identifies the consumer and its tables.
type Config struct {
	// ConsumerID names this consumer (billing, warehouse): each consumer
	// applies a message once, independently of the others. Required.
	ConsumerID string
	// Table is the inbox table, keyed by (consumer_id, message_id).
	// Defaults to public.inbox_messages.
	Table schema.Table
	// Versions is the table of the last aggregate version applied, for
	// CheckVersion. Defaults to public.inbox_aggregate_versions.
	Versions schema.Table
	// RetryBackoffMin and RetryBackoffMax bound the exponential backoff
	// (backoff.Policy: full jitter) between attempts at a message whose
	// handler failed, and at an offset commit. Default to 100ms and 30s.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Registerer receives the inbox metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// Defaults of Config.
var (
	defaultTable    = schema.Table{Schema: "public", Name: "inbox_messages"}
	defaultVersions = schema.Table{Schema: "public", Name: "inbox_aggregate_versions"}
)

const (
	defaultBackoffMin = 100 * time.Millisecond
	defaultBackoffMax = 30 * time.Second
)

// withDefaults fills the unset fields of c.
func (c Config) withDefaults() Config {
	if c.Table == (schema.Table{}) {
		c.Table = defaultTable
	}
	if c.Versions == (schema.Table{}) {
		c.Versions = defaultVersions
	}
	if c.RetryBackoffMin == 0 {
		c.RetryBackoffMin = defaultBackoffMin
	}
	if c.RetryBackoffMax == 0 {
		c.RetryBackoffMax = max(defaultBackoffMax, c.RetryBackoffMin)
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Inbox applies messages exactly once per consumer. It holds no connection
// and is safe for concurrent use.
type Inbox struct {
	c       Config
	ddl     string
	log     *zap.Logger
	metrics *metrics
	// SQL with the quoted table names.
	insertSQL, pruneSQL          string
	versionSQL, versionInsertSQL string
	versionUpdateSQL             string
}

// New validates c, registers the metrics and returns an Inbox.
func New(c Config) (*Inbox, error) {
	c = c.withDefaults()
	if c.ConsumerID == "" {
		return nil, errors.New("inbox: ConsumerID is required")
	}
	if c.RetryBackoffMin < 0 || c.RetryBackoffMax < c.RetryBackoffMin {
		return nil, fmt.Errorf("inbox: retry backoff from %s to %s: want 0 <= min <= max", c.RetryBackoffMin, c.RetryBackoffMax)
	}
	ddl, err := schema.InboxDDL(c.Table, c.Versions)
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	m, err := newMetrics(c.Registerer, c.ConsumerID)
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	in := &Inbox{
		c:       c,
		ddl:     ddl,
		log:     c.Logger.With(zap.String("consumer", c.ConsumerID)),
		metrics: m,
	}
	in.prepareSQL()
	return in, nil
}

// DDL creates the inbox and versions tables; safe to run twice.
func (in *Inbox) DDL() string { return in.ddl }

// prepareSQL writes the statements with the configured, validated tables.
func (in *Inbox) prepareSQL() {
	t, v := in.c.Table.Quoted(), in.c.Versions.Quoted()
	in.insertSQL = `INSERT INTO ` + t + ` (consumer_id, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	in.pruneSQL = `DELETE FROM ` + t + ` WHERE consumer_id = $1 AND message_id IN (
		SELECT message_id FROM ` + t + ` WHERE consumer_id = $1 AND processed_at < $2
		ORDER BY processed_at LIMIT $3)`
	in.versionSQL = `SELECT version FROM ` + v + `
		WHERE consumer_id = $1 AND aggregate_type = $2 AND aggregate_id = $3 FOR UPDATE`
	in.versionInsertSQL = `INSERT INTO ` + v + ` (consumer_id, aggregate_type, aggregate_id, version)
		VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`
	in.versionUpdateSQL = `UPDATE ` + v + ` SET version = $4, updated_at = now()
		WHERE consumer_id = $1 AND aggregate_type = $2 AND aggregate_id = $3 AND version < $4`
}

// Handle applies m once: in one transaction it inserts (consumer_id,
// message_id) with ON CONFLICT DO NOTHING; when the row was already there it
// commits nothing else and returns applied false (a duplicate, counted);
// otherwise it runs h in the same transaction and commits. When h fails,
// the inbox row rolls back with the effect, and the error is returned.
//
// Two transactions handling the same message at once (a redelivery to a
// second instance of the consumer) meet at the inbox row: the second insert
// waits for the first transaction; when that commits, the second is a
// duplicate; when it rolls back, the second applies the message.
//
// That is READ COMMITTED, PostgreSQL's default. Under REPEATABLE READ or
// SERIALIZABLE the waiting transaction fails with a serialization error
// instead, and handling m again (Consume does) finds the duplicate.
//
// An error from the commit itself is ambiguous (the commit may have landed);
// handling m again then finds out, as a duplicate or by applying it.
func (in *Inbox) Handle(ctx context.Context, db Beginner, m Message, h Handler) (applied bool, err error) {
	start := time.Now()
	applied, err = in.handle(ctx, db, m, h)
	in.metrics.seconds.Observe(time.Since(start).Seconds())
	switch {
	case err != nil:
		in.metrics.failed.Inc()
	case !applied:
		in.metrics.duplicate.Inc()
		in.log.Info("duplicate message skipped", zap.Stringer("message_id", m.ID),
			zap.String("topic", m.Topic), zap.Int("partition", m.Partition), zap.Int64("offset", m.Offset))
	default:
		in.metrics.applied.Inc()
	}
	return applied, err
}

// narrowColumnHint explains PostgreSQL's refusal of a message id's text by
// the inbox's message_id column: tables made before message ids of every
// type were carried as text (DECISIONS.md 33) have a uuid column, which an
// id that is not a uuid cannot enter. Handling the message again fails the
// same way until the column is widened; nothing is skipped meanwhile.
func (in *Inbox) narrowColumnHint(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22P02" { // invalid_text_representation
		return ""
	}
	return fmt.Sprintf(" (the table's message_id column does not take this id; an inbox table made for uuid ids has a uuid column: have its owner run ALTER TABLE %s ALTER COLUMN message_id TYPE text)", in.c.Table.Quoted())
}

// handle is Handle without the counting.
func (in *Inbox) handle(ctx context.Context, db Beginner, m Message, h Handler) (bool, error) {
	if h == nil {
		return false, errors.New("inbox: nil handler")
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("message %s: begin: %w", m.ID, err)
	}
	// A duplicate ends here, with nothing to commit; after Commit it does nothing.
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // the error that matters is returned below
	tag, err := tx.Exec(ctx, in.insertSQL, in.c.ConsumerID, string(m.ID))
	if err != nil {
		return false, fmt.Errorf("message %s: insert into inbox %s: %w%s", m.ID, in.c.Table, err, in.narrowColumnHint(err))
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if err := h(ctx, tx, m); err != nil {
		return false, fmt.Errorf("message %s: handler: %w", m.ID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("message %s: commit: %w", m.ID, err)
	}
	return true, nil
}
