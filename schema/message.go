package schema

import (
	"encoding/hex"
	"time"

	"github.com/jackc/pglogrepl"
)

// MessageID is the outbox row's message_id: a UUID, stable across every
// retry and replay, and the consumers' de-duplication key.
type MessageID [16]byte

// String formats the id in the canonical 8-4-4-4-12 form.
func (id MessageID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

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
	// json/jsonb/text column, the bytes of a bytea column. Nil never occurs
	// in a decoded message; an empty payload is an empty, non-nil slice.
	Payload []byte
	// ContentType follows from the payload column's type
	// (application/json for json and jsonb).
	ContentType string
	// Headers are the string entries of the headers column, sorted by key.
	Headers []Header
	// OccurredAt is the event time; zero when the column is null or absent.
	OccurredAt time.Time
	// Topic is the row's explicit topic override; empty when null or absent.
	Topic string

	// CommitLSN and CommitTime identify the transaction the row was committed
	// in (pgoutput Begin: final LSN and commit timestamp). For logs and
	// latency metrics only: the confirm rule uses the Commit's end LSN.
	CommitLSN  pglogrepl.LSN
	CommitTime time.Time
}

// Size is the number of bytes the message holds on to, for in-flight
// memory bounds. It counts payload, strings and headers, not the struct.
func (m *Message) Size() int {
	n := len(m.Payload) + len(m.AggregateType) + len(m.AggregateID) + len(m.Type) + len(m.Topic) + len(m.ContentType)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}
