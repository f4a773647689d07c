package inbox

import (
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

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
//
// The headers walrelay's sink writes fill the fields: ce_id, ce_type,
// aggregate_type, aggregate_version (a decimal int64) and ce_time
// (RFC 3339); a present but malformed version or time is an error too. The
// aggregate id is the record key, or ce_subject when the key is empty.
// Every other header (ce_specversion, ce_source, content-type, traceparent,
// correlation_id, the application's own) goes into Headers; of repeated
// keys the last wins, except that two different ce_id values are an error.
// Errors name the record's topic, partition and offset.
func Parse(km kafka.Message) (Message, error) {
	m := Message{
		AggregateID: string(km.Key),
		Payload:     km.Value,
		Topic:       km.Topic,
		Partition:   km.Partition,
		Offset:      km.Offset,
	}
	var id, subject string
	for _, h := range km.Headers {
		v := string(h.Value)
		var err error
		switch h.Key {
		case schema.HeaderID:
			if id != "" && id != v {
				err = fmt.Errorf("two different %s headers, %q and %q", schema.HeaderID, id, v)
			}
			id = v
		case schema.HeaderSubject:
			subject = v
		case schema.HeaderType:
			m.Type = v
		case schema.HeaderAggregateType:
			m.AggregateType = v
		case schema.HeaderAggregateVersion:
			m.AggregateVersion, err = strconv.ParseInt(v, 10, 64)
			m.HasVersion = err == nil
		case schema.HeaderTime:
			m.OccurredAt, err = time.Parse(time.RFC3339Nano, v)
		default:
			if m.Headers == nil {
				m.Headers = make(map[string]string, len(km.Headers))
			}
			m.Headers[h.Key] = v
		}
		if err != nil {
			return Message{}, m.errorf("header %s: %w", h.Key, err)
		}
	}
	if id == "" {
		return Message{}, m.errorf("no %s header: not a walrelay message, it cannot be de-duplicated", schema.HeaderID)
	}
	var err error
	if m.ID, err = schema.ParseMessageID(id); err != nil {
		return Message{}, m.errorf("header %s: %w", schema.HeaderID, err)
	}
	if m.AggregateID == "" {
		m.AggregateID = subject
	}
	return m, nil
}

// Where is the record's place in Kafka, for errors and logs:
// "topic orders partition 2 offset 41".
func (m Message) Where() string {
	return fmt.Sprintf("topic %s partition %d offset %d", m.Topic, m.Partition, m.Offset)
}

// errorf prefixes an error about m with where the record was read from.
func (m Message) errorf(format string, args ...any) error {
	return fmt.Errorf("record at %s: "+format, append([]any{m.Where()}, args...)...)
}
