package inbox

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/schema"
)

// Message is a walrelay record as a consumer sees it.
type Message struct {
	ID            schema.MessageID // ce_id
	Type          string           // ce_type
	AggregateType string           // aggregate_type
	AggregateID   string           // the record key (ce_subject)
	// AggregateVersion is valid only when HasVersion is true.
	AggregateVersion int64
	HasVersion       bool
	OccurredAt       time.Time // ce_time; zero when absent
	Payload          []byte    // the record value
	// Headers are the record's other headers (traceparent, correlation_id,
	// the application's own), by key.
	Headers map[string]string
	// Where the record was read from.
	Topic     string
	Partition int
	Offset    int64
}

// Parse reads a walrelay record. A record without a valid ce_id cannot be
// de-duplicated and is an error.
func Parse(km kafka.Message) (Message, error) { panic("inbox: not implemented yet (issue 6)") }

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
	// RetryBackoffMin and RetryBackoffMax bound the exponential backoff (with
	// jitter) between attempts at a message whose handler failed. Default
	// to 100ms and 30s.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Registerer receives the inbox metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// Inbox applies messages exactly once per consumer.
type Inbox struct{}

// New validates c, registers the metrics and returns an Inbox.
func New(c Config) (*Inbox, error) { panic("inbox: not implemented yet (issue 6)") }

// DDL creates the inbox and versions tables; safe to run twice.
func (in *Inbox) DDL() string { panic("inbox: not implemented yet (issue 6)") }

// Handle applies m once: in one transaction it inserts (consumer_id,
// message_id) with ON CONFLICT DO NOTHING; when the row was already there it
// commits nothing else and returns applied false (a duplicate, counted);
// otherwise it runs h in the same transaction and commits. When h fails,
// the inbox row rolls back with the effect, and the error is returned.
func (in *Inbox) Handle(ctx context.Context, db Beginner, m Message, h Handler) (applied bool, err error) {
	panic("inbox: not implemented yet (issue 6)")
}

// Consume reads r (a kafka.Reader with a GroupID) until ctx ends: for each
// record it parses, handles (retrying a failed handler with backoff, the
// partition waiting), and only after the database commit commits the Kafka
// offset. A crash between the two redelivers the record; Handle recognises
// it. A record that is not a walrelay message stops Consume with an error
// naming its topic, partition and offset: it is never skipped silently.
func (in *Inbox) Consume(ctx context.Context, r *kafka.Reader, db Beginner, h Handler) error {
	panic("inbox: not implemented yet (issue 6)")
}

// Prune deletes inbox rows of this consumer older than olderThan, batch rows
// at a time with pause between batches, and returns how many it deleted.
// olderThan must exceed the longest time a message can be delivered again:
// Kafka's retention on the topics (a consumer group reset to the earliest
// offset rereads all of it) and the relay's replays.
func (in *Inbox) Prune(ctx context.Context, db Beginner, olderThan time.Duration, batch int, pause time.Duration) (int64, error) {
	panic("inbox: not implemented yet (issue 6)")
}

// Order is where a message's aggregate version stands against the last one
// this consumer applied for the aggregate.
type Order int

const (
	// First: no version of the aggregate was applied before.
	First Order = iota
	// Next: exactly one more than the last applied.
	Next
	// Stale: not newer than the last applied (an old or repeated version).
	Stale
	// Gap: newer than the last applied plus one; versions are missing.
	Gap
)

// CheckVersion compares m's aggregate version with the last one applied for
// its aggregate by this consumer, in tx, and records m's version when it is
// First, Next or Gap (never moving backwards). A message without a version
// is an error.
func (in *Inbox) CheckVersion(ctx context.Context, tx pgx.Tx, m Message) (Order, error) {
	panic("inbox: not implemented yet (issue 6)")
}
