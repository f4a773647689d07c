package dlq

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/walrelay/walrelay/schema"
)

// insertArgs are the values of insertColumns for dl. A decoded message
// gives its fields (a tombstone a NULL payload); a row that could not be decoded gives its columns as
// text in row_data. An unknown aggregate type is stored as an empty
// string (so that aggregates compare with =), an unknown aggregate id as
// null.
func insertArgs(dl schema.DeadLetter) ([]any, error) {
	if dl.Reason == "" {
		return nil, fmt.Errorf("dead letter without a reason")
	}
	agg := aggregateOf(dl)
	var aggID *string
	if agg.ID != "" {
		aggID = &agg.ID
	}
	var blockedBy *schema.MessageID
	if dl.BlockedBy != nil {
		blockedBy = dl.BlockedBy.MessageID
	}
	args := []any{dl.Position.CommitLSN.String(), int64(dl.Position.Seq), idArg(messageIDOf(dl)), agg.Type, aggID}
	m := dl.Message
	if m == nil {
		rowData, err := rowDataArg(dl.Row)
		if err != nil {
			return nil, err
		}
		return append(args, nil, nil, nil, textArg(dl.Topic), nil, nil, nil, nil, timeArg(dl.CommitTime),
			rowData, dl.Reason, idArg(blockedBy)), nil
	}
	headers, err := headersArg(m.Headers)
	if err != nil {
		return nil, err
	}
	var version *int64
	if m.HasVersion {
		version = &m.AggregateVersion
	}
	committed := dl.CommitTime
	if committed.IsZero() {
		committed = m.CommitTime
	}
	payload := m.Payload // a tombstone's nil is NULL, and comes back as a tombstone
	if payload == nil && !m.Tombstone {
		payload = []byte{}
	}
	return append(args, version, m.Type, textArg(m.Topic), textArg(dl.Topic), payload, textArg(m.ContentType),
		headers, timeArg(m.OccurredAt), timeArg(committed), nil, dl.Reason, idArg(blockedBy)), nil
}

// aggregateOf is dl's aggregate, taken from its message when dl leaves it
// out.
func aggregateOf(dl schema.DeadLetter) schema.Aggregate {
	if dl.Aggregate == (schema.Aggregate{}) && dl.Message != nil {
		return schema.Aggregate{Type: dl.Message.AggregateType, ID: dl.Message.AggregateID}
	}
	return dl.Aggregate
}

func messageIDOf(dl schema.DeadLetter) *schema.MessageID {
	if dl.MessageID == nil && dl.Message != nil {
		return &dl.Message.ID
	}
	return dl.MessageID
}

// idArg is a message id as a query argument: text, which PostgreSQL reads
// into the dead-letter table's message_id and blocked_by columns whether
// they are text or (in tables made before message ids of other types) uuid.
func idArg(id *schema.MessageID) *string {
	if id == nil {
		return nil
	}
	s := string(*id)
	return &s
}

func textArg(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func timeArg(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// headersArg is the headers as the outbox headers column had them: a JSON
// object of strings; null when there are none.
func headersArg(hs []schema.Header) ([]byte, error) {
	if len(hs) == 0 {
		return nil, nil
	}
	obj := make(map[string]string, len(hs))
	for _, h := range hs {
		obj[h.Key] = h.Value
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode headers: %w", err)
	}
	return b, nil
}

// parseHeaders reads a headers object back, keeping its string entries,
// sorted by key as the decoder gives them.
func parseHeaders(b []byte) ([]schema.Header, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("decode headers: %w", err)
	}
	var hs []schema.Header
	for k, v := range obj {
		if s, ok := v.(string); ok {
			hs = append(hs, schema.Header{Key: k, Value: s})
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].Key < hs[j].Key })
	return hs, nil
}

func rowDataArg(row map[string]*string) ([]byte, error) {
	if row == nil {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(row)
	if err != nil {
		return nil, fmt.Errorf("encode row data: %w", err)
	}
	return b, nil
}

// nullID scans a nullable message id column (text, or uuid in tables made
// before message ids of other types).
type nullID struct{ pgtype.Text }

func (n nullID) ptr() *schema.MessageID {
	if !n.Valid {
		return nil
	}
	id := schema.MessageID(n.String)
	return &id
}

// position builds a Position from commit_lsn::text and seq.
func position(lsn string, seq int64) (schema.Position, error) {
	l, err := pglogrepl.ParseLSN(lsn)
	if err != nil {
		return schema.Position{}, fmt.Errorf("commit_lsn %q: %w", lsn, err)
	}
	if seq < 0 || seq > 1<<32-1 {
		return schema.Position{}, fmt.Errorf("seq %d out of range", seq)
	}
	return schema.Position{CommitLSN: l, Seq: uint32(seq)}, nil
}

// ParsePosition reads a position as schema.Position.String writes it:
// "0/16B3748#2".
func ParsePosition(s string) (schema.Position, error) {
	lsn, seq, ok := strings.Cut(s, "#")
	if !ok {
		return schema.Position{}, fmt.Errorf("position %q: want LSN#SEQ, like 0/16B3748#2", s)
	}
	n, err := strconv.ParseUint(seq, 10, 32)
	if err != nil {
		return schema.Position{}, fmt.Errorf("position %q: sequence %q is not a whole number", s, seq)
	}
	p, err := position(lsn, int64(n))
	if err != nil {
		return schema.Position{}, fmt.Errorf("position %q: %w", s, err)
	}
	return p, nil
}
