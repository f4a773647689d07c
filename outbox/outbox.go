package outbox

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/schema"
)

// Message is one outbox row to write.
type Message struct {
	// ID is the message_id. Zero: Write picks a new one (NewID) and stores
	// it here, so the caller can log or return it. Chosen once per message;
	// every retry and replay of the message carries it.
	ID schema.MessageID
	// AggregateType routes the message to a topic. Required.
	AggregateType string
	// AggregateID is the Kafka key. Required, never empty.
	AggregateID string
	// AggregateVersion is written only when HasVersion is true (the column
	// is null otherwise).
	AggregateVersion int64
	HasVersion       bool
	// Type is the contract name and version, e.g. "order.submitted.v1".
	// Required.
	Type string
	// Payload is encoded with encoding/json; a json.RawMessage or []byte is
	// taken as JSON text as it is (and must be valid JSON).
	Payload any
	// Headers are extra string headers. An entry here wins over the one
	// Write takes from the context (traceparent, correlation id).
	Headers map[string]string
	// OccurredAt is the event time. Zero: the database's now() (the
	// transaction's start).
	OccurredAt time.Time
	// Topic overrides the topic the relay derives from AggregateType.
	Topic string
}

// Config names the outbox table in the application's database.
type Config struct {
	// Table is the outbox table. Defaults to public.outbox_messages.
	Table schema.Table
	// Columns maps the contract to the table. Defaults to
	// schema.DefaultColumns().
	Columns schema.Columns
	// MaxPayloadBytes refuses, before commit, a message whose encoded payload
	// is larger. Defaults to 900 KiB, the relay's own default limit (under
	// Kafka's default 1 MiB record limit).
	MaxPayloadBytes int
}

// Writer writes outbox rows inside the caller's transaction. It never opens
// a connection of its own: the business change and its messages commit or
// roll back together because they share the caller's pgx.Tx. Safe for
// concurrent use.
type Writer struct{}

// New validates c and returns a Writer.
func New(c Config) (*Writer, error) { panic("outbox: not implemented yet (issue 6)") }

// Write validates every message (a bad one fails the call before anything
// is written, so the caller rolls back), fills in zero IDs, adds the
// traceparent and correlation id of ctx to the headers, and inserts the rows
// in tx with one statement.
func (w *Writer) Write(ctx context.Context, tx pgx.Tx, msgs ...*Message) error {
	panic("outbox: not implemented yet (issue 6)")
}

// NewID returns a new random, time-ordered UUID (version 7), so that ids
// written close in time sit close in the primary key's index.
func NewID() schema.MessageID { panic("outbox: not implemented yet (issue 6)") }

// WithTraceparent returns ctx carrying a W3C traceparent
// ("00-<trace-id>-<parent-id>-<flags>") for Write to put into the headers.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	panic("outbox: not implemented yet (issue 6)")
}

// WithCorrelationID returns ctx carrying a correlation id for Write to put
// into the headers.
func WithCorrelationID(ctx context.Context, id string) context.Context {
	panic("outbox: not implemented yet (issue 6)")
}
