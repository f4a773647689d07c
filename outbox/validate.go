package outbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/walrelay/walrelay/schema"
)

// Field names the Message field a ValidationError is about.
type Field string

// The fields Write validates. FieldMessage is the message as a whole (a
// nil *Message).
const (
	FieldMessage       Field = "Message"
	FieldID            Field = "ID"
	FieldAggregateType Field = "AggregateType"
	FieldAggregateID   Field = "AggregateID"
	FieldType          Field = "Type"
	FieldPayload       Field = "Payload"
	FieldHeaders       Field = "Headers"
	FieldTopic         Field = "Topic"
)

// ValidationError is why Write refused a call before writing anything:
// message Index (of the msgs passed to Write) has a bad Field. Find it with
// errors.As; the caller rolls back.
type ValidationError struct {
	Index  int
	Field  Field
	Reason string // e.g. "is empty", "is 1048576 bytes, over the limit of 921600"
	// Err is the underlying error, if any (the JSON encoder's, for a
	// payload that does not encode).
	Err error
}

func (e *ValidationError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("outbox: message %d: %s %s: %v", e.Index, e.Field, e.Reason, e.Err)
	}
	return fmt.Sprintf("outbox: message %d: %s %s", e.Index, e.Field, e.Reason)
}

// Unwrap returns Err.
func (e *ValidationError) Unwrap() error { return e.Err }

// maxTopicLen is Kafka's limit on a topic name.
const maxTopicLen = 249

// row is a validated message, as its columns take it.
type row struct {
	id            schema.MessageID
	aggregateType string
	aggregateID   string
	version       any // int64, or nil for null
	typ           string
	payload       []byte
	headers       any // []byte of a JSON object, or nil for null
	occurredAt    any // time.Time, or nil for the database's now()
	topic         any // string, or nil for null
}

// prepareOne validates m and makes its row; the error's Index is left to
// the caller.
func (w *Writer) prepareOne(m *Message, fromCtx map[string]string) (row, *ValidationError) {
	if m == nil {
		return row{}, &ValidationError{Field: FieldMessage, Reason: "is nil"}
	}
	if err := checkStrings(m); err != nil {
		return row{}, err
	}
	payload, err := encodePayload(m.Payload, w.maxPayload)
	if err != nil {
		return row{}, err
	}
	headers, err := encodeHeaders(fromCtx, m.Headers)
	if err != nil {
		return row{}, err
	}
	r := row{id: m.ID, aggregateType: m.AggregateType, aggregateID: m.AggregateID, typ: m.Type,
		payload: payload, headers: headers}
	if r.id == "" {
		r.id = NewID()
	}
	if m.HasVersion {
		r.version = m.AggregateVersion
	}
	if !m.OccurredAt.IsZero() {
		r.occurredAt = m.OccurredAt
	}
	if m.Topic != "" {
		r.topic = m.Topic
	}
	return r, nil
}

// checkStrings checks the text fields of m.
func checkStrings(m *Message) *ValidationError {
	for _, f := range []struct {
		field Field
		value string
	}{{FieldAggregateType, m.AggregateType}, {FieldAggregateID, m.AggregateID}, {FieldType, m.Type}} {
		if f.value == "" {
			return &ValidationError{Field: f.field, Reason: "is empty"}
		}
		if reason := checkText(f.value); reason != "" {
			return &ValidationError{Field: f.field, Reason: reason}
		}
	}
	if m.Topic != "" {
		if reason := checkTopic(m.Topic); reason != "" {
			return &ValidationError{Field: FieldTopic, Reason: reason}
		}
	}
	return nil
}

// checkText returns why PostgreSQL's text cannot hold s, or "".
func checkText(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "contains a NUL byte"
	}
	return ""
}

// checkTopic returns why Kafka would refuse the topic name t, or "".
func checkTopic(t string) string {
	if len(t) > maxTopicLen {
		return fmt.Sprintf("is %d characters long; Kafka allows %d", len(t), maxTopicLen)
	}
	if t == "." || t == ".." {
		return fmt.Sprintf("%q is not a legal Kafka topic name", t)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Sprintf("%q: Kafka allows only letters, digits, '.', '_' and '-' in a topic name", t)
		}
	}
	return ""
}

// encodePayload returns the JSON text of p, within limit bytes.
func encodePayload(p any, limit int) ([]byte, *ValidationError) {
	var b []byte
	switch v := p.(type) {
	case nil:
		return nil, &ValidationError{Field: FieldPayload, Reason: `is nil (write json.RawMessage("null") for a JSON null)`}
	case json.RawMessage:
		b = v
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, &ValidationError{Field: FieldPayload, Reason: "does not encode to JSON", Err: err}
		}
	}
	if !json.Valid(b) {
		return nil, &ValidationError{Field: FieldPayload, Reason: "is not valid JSON"}
	}
	if n := payloadSize(b); n > limit {
		return nil, &ValidationError{Field: FieldPayload, Reason: fmt.Sprintf("is %d bytes, over the limit of %d", n, limit)}
	}
	return b, nil
}

// payloadSize is the larger of the length of the valid JSON text b and the
// length of its jsonb text form, which is what the relay reads from the WAL
// for a jsonb column: PostgreSQL drops the whitespace between tokens and
// prints one space after every ',' and ':'. (It also normalizes numbers and
// string escapes; that only shortens the text, except a number in exponent
// form like 1e300, which is printed in full. Such payloads are rare and
// are counted short.)
func payloadSize(b []byte) int {
	inString, escaped, n := false, false, len(b)
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ',' || c == ':':
			n++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			n--
		}
	}
	return max(n, len(b))
}

// encodeHeaders merges the context's headers and the message's own (which
// win) into the JSON object for the headers column, nil when there is none.
func encodeHeaders(fromCtx, own map[string]string) (any, *ValidationError) {
	if len(fromCtx) == 0 && len(own) == 0 {
		return nil, nil
	}
	merged := make(map[string]string, len(fromCtx)+len(own))
	for k, v := range fromCtx {
		merged[k] = v
	}
	for k, v := range own {
		if reason := checkHeader(k, v); reason != "" {
			return nil, &ValidationError{Field: FieldHeaders, Reason: reason}
		}
		merged[k] = v
	}
	b, err := json.Marshal(merged)
	if err != nil {
		return nil, &ValidationError{Field: FieldHeaders, Reason: "do not encode to JSON", Err: err}
	}
	return b, nil
}

// checkHeader returns why the header k: v cannot be written, or "".
func checkHeader(k, v string) string {
	if k == "" {
		return "have an empty key"
	}
	if reason := checkText(k); reason != "" {
		return fmt.Sprintf("key %q %s", k, reason)
	}
	if reason := checkText(v); reason != "" {
		return fmt.Sprintf("value of %q %s", k, reason)
	}
	switch d := schema.CheckHeader(k, v); d {
	case "":
		return ""
	case schema.DropReserved:
		return fmt.Sprintf("key %q is one the relay sets itself (it would drop this entry)", k)
	default:
		return fmt.Sprintf("entry %q: %s (the relay would drop it)", k, d.Explain())
	}
}
