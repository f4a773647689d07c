package schema

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// MessageID is the outbox row's message id as text: the canonical form of
// a uuid, the digits of a bigint, or a text column's value. It is stable
// across every retry and replay, the record's ce_id, and the consumers'
// de-duplication key. Never empty in a decoded message.
type MessageID string

// String is the id itself.
func (id MessageID) String() string { return string(id) }

// Header is one extra Kafka header taken from the row's headers column.
type Header struct {
	Key   string
	Value string
}

// Message is one committed outbox row, ready to be published.
//
// Payload and the strings may share memory with the WAL buffer they were
// decoded from; that buffer is owned by the message and never reused.
type Message struct {
	ID            MessageID
	AggregateType string
	// AggregateID is the Kafka key. Never empty in a decoded message.
	AggregateID string
	// AggregateVersion is valid only when HasVersion is true (the column is
	// nullable and optional).
	AggregateVersion int64
	HasVersion       bool
	// Type is the contract name and version, e.g. "order.submitted.v1".
	Type string
	// Payload is the record value, passed through unchanged: the text of a
	// json/jsonb/text column, the bytes of a bytea column. It is nil in a
	// tombstone only; an empty payload is an empty, non-nil slice.
	Payload []byte
	// Tombstone marks a row whose payload is NULL, decoded as a Kafka
	// tombstone (a record with a null value) rather than as a bad row: an
	// empty text payload is not null, so the mark is a field of its own
	// rather than a nil Payload. Payload is then nil and ContentType empty.
	Tombstone bool
	// ContentType follows from the payload column's type (application/json
	// for json and jsonb), unless the decoder was given one.
	ContentType string
	// Headers are the string entries of the headers column, sorted by key,
	// as the row has them: the sink drops those CheckHeader refuses. A
	// trace context read from the row's span context column (Debezium's
	// tracingspancontext) is among them, as traceparent and tracestate.
	Headers []Header
	// SpanContextDrops are the trace headers (traceparent, tracestate) the
	// row's span context column held in a form walrelay does not put on a
	// record: the message goes without them, and the sink counts and logs
	// each (DropSpanContext). Empty for most messages, and never kept in a
	// dead letter: the drop is counted when the message is first built.
	SpanContextDrops []string
	// OccurredAt is the event time; zero when the column is null or absent.
	OccurredAt time.Time
	// Topic is the row's explicit topic override; empty when null or absent.
	Topic string

	// Table is which of the relay's outbox tables the row is from: its
	// index in the order they were configured (decoder.NewTables); 0 with
	// one table.
	Table int

	// CommitLSN and CommitTime identify the transaction the row was committed
	// in (pgoutput Begin: final LSN and commit timestamp). For logs and
	// latency metrics only: the confirm rule uses the Commit's end LSN.
	CommitLSN  pglogrepl.LSN
	CommitTime time.Time
	// Seq is the row's place among the outbox rows of its transaction,
	// counting from 0. With CommitLSN it is the row's Position.
	Seq uint32
}

// Position is where the row is in the WAL: CommitLSN, Seq.
func (m *Message) Position() Position { return Position{CommitLSN: m.CommitLSN, Seq: m.Seq} }

// Position identifies one outbox row in the WAL for good: the commit LSN of
// its transaction and its place among that transaction's outbox rows. The
// dead-letter table is keyed by it, and it orders the rows of an aggregate
// as they were committed.
type Position struct {
	CommitLSN pglogrepl.LSN
	Seq       uint32
}

// Less reports whether p comes before q in the WAL.
func (p Position) Less(q Position) bool {
	return p.CommitLSN < q.CommitLSN || p.CommitLSN == q.CommitLSN && p.Seq < q.Seq
}

// String is the commit LSN and the sequence, e.g. "0/16B3748#2".
func (p Position) String() string { return fmt.Sprintf("%s#%d", p.CommitLSN, p.Seq) }

// Size is the number of bytes the message holds on to, for in-flight
// memory bounds. It counts payload, strings and headers, not the struct.
func (m *Message) Size() int {
	n := len(m.Payload) + len(m.AggregateType) + len(m.AggregateID) + len(m.Type) + len(m.Topic) + len(m.ContentType)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// ParseMessageID takes a message id given as text (a flag, a ce_id): any
// non-empty text of at most MaxMessageIDBytes bytes, as the outbox row's
// message id column prints it (a uuid in its canonical form, the digits of
// a bigint, a text column's value).
func ParseMessageID(s string) (MessageID, error) {
	switch {
	case s == "":
		return "", errors.New("message id is empty")
	case len(s) > MaxMessageIDBytes:
		return "", fmt.Errorf("message id of %d bytes is over the limit of %d", len(s), MaxMessageIDBytes)
	}
	return MessageID(s), nil
}

// MaxMessageIDBytes bounds a message id: it is a Kafka header value, a key
// of the consumers' inbox tables and of their indexes.
const MaxMessageIDBytes = 1024
