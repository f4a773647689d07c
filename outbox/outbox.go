package outbox

import (
	"context"
	"errors"
	"fmt"
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
	// taken as JSON text as it is (and must be valid JSON). A nil Payload is
	// refused (a forgotten payload is likelier than a wanted JSON null:
	// write json.RawMessage("null") for that).
	Payload any
	// Headers are extra string headers. An entry here wins over the one
	// Write takes from the context (traceparent, correlation id). Keys the
	// relay sets itself (ce_*, content-type, aggregate_type,
	// aggregate_version, in any case) are refused: it would drop them.
	Headers map[string]string
	// OccurredAt is the event time. Zero: the database's now() (the
	// transaction's start).
	OccurredAt time.Time
	// Topic overrides the topic the relay derives from AggregateType.
	Topic string
}

// Config names the outbox table in the application's database.
type Config struct {
	// Table is the outbox table. Defaults to public.outbox_messages; an
	// empty Schema defaults to public.
	Table schema.Table
	// Columns maps the contract to the table. Defaults to
	// schema.DefaultColumns(); an empty field takes its default name.
	Columns schema.Columns
	// MaxPayloadBytes refuses, before commit, a message whose encoded payload
	// is larger. Defaults to 900 KiB, the relay's own default limit (under
	// Kafka's default 1 MiB record limit). The size counted is what the
	// relay will measure: for a jsonb column, PostgreSQL's text form, which
	// has a space after every ',' and ':' (see payloadSize).
	MaxPayloadBytes int
}

// DefaultMaxPayloadBytes is Config.MaxPayloadBytes' default, the relay's
// own default limit.
const DefaultMaxPayloadBytes = 900 << 10

// Writer writes outbox rows inside the caller's transaction. It never opens
// a connection of its own: the business change and its messages commit or
// roll back together because they share the caller's pgx.Tx. Safe for
// concurrent use.
type Writer struct {
	maxPayload int
	insert     insertSQL
}

// New validates c and returns a Writer.
func New(c Config) (*Writer, error) {
	c = c.withDefaults()
	if c.MaxPayloadBytes < 0 {
		return nil, fmt.Errorf("outbox: MaxPayloadBytes is %d; want 0 (the default) or more", c.MaxPayloadBytes)
	}
	if err := c.Table.Validate("outbox table"); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	if err := c.Columns.Validate(); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return &Writer{maxPayload: c.MaxPayloadBytes, insert: newInsertSQL(c.Table, c.Columns)}, nil
}

// withDefaults fills in every default of c.
func (c Config) withDefaults() Config {
	if c.Table == (schema.Table{}) {
		c.Table = schema.DefaultConfig().Table
	}
	if c.Table.Schema == "" {
		c.Table.Schema = "public"
	}
	names, defaults := c.Columns.Names(), schema.DefaultColumns().Names()
	for f := range names {
		if names[f] == "" {
			names[f] = defaults[f]
		}
	}
	c.Columns = schema.Columns{
		MessageID: names[schema.FieldMessageID], AggregateType: names[schema.FieldAggregateType],
		AggregateID: names[schema.FieldAggregateID], AggregateVersion: names[schema.FieldAggregateVersion],
		Type: names[schema.FieldType], Payload: names[schema.FieldPayload], Headers: names[schema.FieldHeaders],
		OccurredAt: names[schema.FieldOccurredAt], Topic: names[schema.FieldTopic],
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	return c
}

// Write validates every message (a bad one fails the call before anything
// is written, so the caller rolls back), fills in zero IDs, adds the
// traceparent and correlation id of ctx to the headers, and inserts the rows
// in tx with one statement. (PostgreSQL takes at most 65,535 parameters in
// a statement: a call of more than 7,281 messages takes one statement per
// 7,281, still all in tx.)
//
// The rows' parameters take the types of their columns (so the payload
// column may be jsonb, json, text or bytea), which takes a statement the
// server has described: on a connection whose DefaultQueryExecMode is
// QueryExecModeExec or QueryExecModeSimpleProtocol (say for PgBouncer),
// Write runs its statement in QueryExecModeDescribeExec, the extended
// protocol with an unnamed statement, at the cost of one more round trip.
//
// A validation failure is a *ValidationError naming the message and the
// field; any other error is the database's, and leaves tx aborted. Either
// way the caller rolls back.
func (w *Writer) Write(ctx context.Context, tx pgx.Tx, msgs ...*Message) error {
	if tx == nil {
		return errors.New("outbox: write: nil transaction")
	}
	if len(msgs) == 0 {
		return nil
	}
	rows, err := w.prepare(ctx, msgs)
	if err != nil {
		return err
	}
	for i, m := range msgs {
		m.ID = rows[i].id
	}
	mode := execMode(tx)
	for start := 0; start < len(rows); start += maxRowsPerStatement {
		chunk := rows[start:min(start+maxRowsPerStatement, len(rows))]
		if _, err := tx.Exec(ctx, w.insert.forRows(len(chunk)), args(mode, chunk)...); err != nil {
			return fmt.Errorf("outbox: insert into %s: %w", w.insert.table, err)
		}
	}
	return nil
}

// prepare validates msgs and turns them into rows, new ids included,
// without touching msgs.
func (w *Writer) prepare(ctx context.Context, msgs []*Message) ([]row, error) {
	fromCtx := contextHeaders(ctx)
	rows := make([]row, len(msgs))
	seen := make(map[schema.MessageID]int, len(msgs))
	for i, m := range msgs {
		r, err := w.prepareOne(m, fromCtx)
		if err != nil {
			err.Index = i
			return nil, err
		}
		if j, dup := seen[r.id]; dup {
			return nil, &ValidationError{Index: i, Field: FieldID,
				Reason: fmt.Sprintf("%s is also the id of message %d", r.id, j)}
		}
		seen[r.id] = i
		rows[i] = r
	}
	return rows, nil
}
