package decoder

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit/pgoutputtest"
	"github.com/walrelay/walrelay/schema"
)

func mustID(t testing.TB, s string) schema.MessageID {
	t.Helper()
	id, err := schema.ParseMessageID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// wantMessage is the Message of outboxRow.
func wantMessage(t testing.TB) *schema.Message {
	return &schema.Message{
		ID:               mustID(t, testID),
		AggregateType:    "order",
		AggregateID:      "42",
		AggregateVersion: 7,
		HasVersion:       true,
		Type:             "order.submitted.v1",
		Payload:          []byte(`{"total": 10}`),
		ContentType:      "application/json",
		Headers:          []schema.Header{{Key: "traceparent", Value: "00-abc-def-01"}},
		OccurredAt:       time.Date(2026, 12, 2, 13, 4, 11, 123456000, time.UTC),
		CommitLSN:        finalLSN,
		CommitTime:       commitTime,
	}
}

func assertMessage(t testing.TB, got, want *schema.Message) {
	t.Helper()
	if !got.OccurredAt.Equal(want.OccurredAt) || !got.CommitTime.Equal(want.CommitTime) {
		t.Fatalf("times = %v, %v; want %v, %v", got.OccurredAt, got.CommitTime, want.OccurredAt, want.CommitTime)
	}
	if (got.Payload == nil) != (want.Payload == nil) {
		t.Fatalf("payload nil = %v; want %v", got.Payload == nil, want.Payload == nil)
	}
	g, w := *got, *want
	g.OccurredAt, g.CommitTime, w.OccurredAt, w.CommitTime = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("message =\n%+v\nwant\n%+v", g, w)
	}
}

// withType returns the outbox columns with one column's type changed.
func withType(name string, oid uint32) func([]pgoutputtest.Column) []pgoutputtest.Column {
	return func(cols []pgoutputtest.Column) []pgoutputtest.Column {
		for i := range cols {
			if cols[i].Name == name {
				cols[i].OID = oid
			}
		}
		return cols
	}
}

// without returns the outbox columns without the named ones.
func without(names ...string) func([]pgoutputtest.Column) []pgoutputtest.Column {
	return func(cols []pgoutputtest.Column) []pgoutputtest.Column {
		var out []pgoutputtest.Column
		for _, c := range cols {
			if !contains(names, c.Name) {
				out = append(out, c)
			}
		}
		return out
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestDecodeRow(t *testing.T) {
	type badRow struct {
		field  schema.Field
		reason string // a substring of Reason
		hasID  bool
	}
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	tests := []struct {
		name string
		cols func([]pgoutputtest.Column) []pgoutputtest.Column // nil: outboxColumns
		set  map[string]pgoutputtest.Cell                      // over outboxRow
		want func(*schema.Message)                             // over wantMessage
		bad  *badRow
	}{
		{name: "defaults"},

		// message_id
		{name: "id as text, upper case", cols: withType("message_id", oidText),
			set:  map[string]pgoutputtest.Cell{"message_id": text(strings.ToUpper(testID))},
			want: func(m *schema.Message) { m.ID = schema.MessageID(strings.ToUpper(testID)) }},
		{name: "id in braces, as the text has it", cols: withType("message_id", oidText),
			set:  map[string]pgoutputtest.Cell{"message_id": text("{" + testID + "}")},
			want: func(m *schema.Message) { m.ID = schema.MessageID("{" + testID + "}") }},
		{name: "id any text", cols: withType("message_id", oidVarchar),
			set:  map[string]pgoutputtest.Cell{"message_id": text("order-42/evt 7")},
			want: func(m *schema.Message) { m.ID = "order-42/evt 7" }},
		{name: "id bigint", cols: withType("message_id", oidInt8),
			set:  map[string]pgoutputtest.Cell{"message_id": text("9223372036854775807")},
			want: func(m *schema.Message) { m.ID = "9223372036854775807" }},
		{name: "id empty", cols: withType("message_id", oidText), set: map[string]pgoutputtest.Cell{"message_id": text("")},
			bad: &badRow{field: schema.FieldMessageID, reason: "empty"}},
		{name: "id too long", cols: withType("message_id", oidText), set: map[string]pgoutputtest.Cell{"message_id": text(strings.Repeat("x", schema.MaxMessageIDBytes+1))},
			bad: &badRow{field: schema.FieldMessageID, reason: "1025 bytes, over the limit of 1024"}},
		{name: "id at the limit", cols: withType("message_id", oidText),
			set:  map[string]pgoutputtest.Cell{"message_id": text(strings.Repeat("x", schema.MaxMessageIDBytes))},
			want: func(m *schema.Message) { m.ID = schema.MessageID(strings.Repeat("x", schema.MaxMessageIDBytes)) }},
		{name: "id null", set: map[string]pgoutputtest.Cell{"message_id": null},
			bad: &badRow{field: schema.FieldMessageID, reason: "null"}},

		// text fields
		{name: "aggregate id null", set: map[string]pgoutputtest.Cell{"aggregate_id": null},
			bad: &badRow{field: schema.FieldAggregateID, reason: "null", hasID: true}},
		{name: "aggregate id empty", set: map[string]pgoutputtest.Cell{"aggregate_id": text("")},
			bad: &badRow{field: schema.FieldAggregateID, reason: "empty", hasID: true}},
		{name: "aggregate id unchanged toast", set: map[string]pgoutputtest.Cell{"aggregate_id": unchanged},
			bad: &badRow{field: schema.FieldAggregateID, reason: "null", hasID: true}},
		{name: "aggregate id of uuid type", cols: withType("aggregate_id", oidUUID),
			set:  map[string]pgoutputtest.Cell{"aggregate_id": text(testID)},
			want: func(m *schema.Message) { m.AggregateID = testID }},
		{name: "varchar fields", cols: func(c []pgoutputtest.Column) []pgoutputtest.Column {
			return withType("type", oidVarchar)(withType("aggregate_type", oidVarchar)(c))
		}},
		{name: "type null", set: map[string]pgoutputtest.Cell{"type": null},
			bad: &badRow{field: schema.FieldType, reason: "null", hasID: true}},
		{name: "type empty", set: map[string]pgoutputtest.Cell{"type": text("")},
			bad: &badRow{field: schema.FieldType, reason: "empty", hasID: true}},
		{name: "aggregate type null without topic", set: map[string]pgoutputtest.Cell{"aggregate_type": null},
			bad: &badRow{field: schema.FieldAggregateType, reason: "null, and the row has no topic", hasID: true}},
		{name: "aggregate type empty with empty topic", set: map[string]pgoutputtest.Cell{"aggregate_type": text(""), "topic": text("")},
			bad: &badRow{field: schema.FieldAggregateType, reason: "empty, and the row has no topic", hasID: true}},
		{name: "aggregate type null without topic column", cols: without("topic"), set: map[string]pgoutputtest.Cell{"aggregate_type": null},
			bad: &badRow{field: schema.FieldAggregateType, reason: "null", hasID: true}},
		{name: "aggregate type null with topic", set: map[string]pgoutputtest.Cell{"aggregate_type": null, "topic": text("orders.v1")},
			want: func(m *schema.Message) { m.AggregateType, m.Topic = "", "orders.v1" }},
		{name: "topic and aggregate type", set: map[string]pgoutputtest.Cell{"topic": text("orders.v1")},
			want: func(m *schema.Message) { m.Topic = "orders.v1" }},

		// aggregate_version
		{name: "version null", set: map[string]pgoutputtest.Cell{"aggregate_version": null},
			want: func(m *schema.Message) { m.AggregateVersion, m.HasVersion = 0, false }},
		{name: "version int2 negative", cols: withType("aggregate_version", oidInt2),
			set:  map[string]pgoutputtest.Cell{"aggregate_version": text("-5")},
			want: func(m *schema.Message) { m.AggregateVersion = -5 }},
		{name: "version int4 zero", cols: withType("aggregate_version", oidInt4),
			set:  map[string]pgoutputtest.Cell{"aggregate_version": text("0")},
			want: func(m *schema.Message) { m.AggregateVersion = 0 }},
		{name: "version max", set: map[string]pgoutputtest.Cell{"aggregate_version": text("9223372036854775807")},
			want: func(m *schema.Message) { m.AggregateVersion = 1<<63 - 1 }},
		{name: "version min", set: map[string]pgoutputtest.Cell{"aggregate_version": text("-9223372036854775808")},
			want: func(m *schema.Message) { m.AggregateVersion = -1 << 63 }},
		{name: "version overflow", set: map[string]pgoutputtest.Cell{"aggregate_version": text("9223372036854775808")},
			bad: &badRow{field: schema.FieldAggregateVersion, reason: `not an integer: "9223372036854775808"`, hasID: true}},
		{name: "version not a number", set: map[string]pgoutputtest.Cell{"aggregate_version": text("7.0")},
			bad: &badRow{field: schema.FieldAggregateVersion, reason: "not an integer", hasID: true}},
		{name: "version empty", set: map[string]pgoutputtest.Cell{"aggregate_version": text("")},
			bad: &badRow{field: schema.FieldAggregateVersion, reason: "not an integer", hasID: true}},
		{name: "version lone minus", set: map[string]pgoutputtest.Cell{"aggregate_version": text("-")},
			bad: &badRow{field: schema.FieldAggregateVersion, reason: "not an integer", hasID: true}},

		// payload
		{name: "payload null", set: map[string]pgoutputtest.Cell{"payload": null},
			bad: &badRow{field: schema.FieldPayload, reason: "null", hasID: true}},
		{name: "payload json", cols: withType("payload", oidJSON), set: map[string]pgoutputtest.Cell{"payload": text(` {"a" : 1} `)},
			want: func(m *schema.Message) { m.Payload = []byte(` {"a" : 1} `) }},
		{name: "payload text", cols: withType("payload", oidText), set: map[string]pgoutputtest.Cell{"payload": text("hello\n")},
			want: func(m *schema.Message) { m.Payload, m.ContentType = []byte("hello\n"), "text/plain; charset=utf-8" }},
		{name: "payload varchar empty", cols: withType("payload", oidVarchar), set: map[string]pgoutputtest.Cell{"payload": text("")},
			want: func(m *schema.Message) { m.Payload, m.ContentType = []byte{}, "text/plain; charset=utf-8" }},
		{name: "payload bytea", cols: withType("payload", oidBytea), set: map[string]pgoutputtest.Cell{"payload": text(`\x00017fFF`)},
			want: func(m *schema.Message) {
				m.Payload, m.ContentType = []byte{0, 1, 0x7f, 0xff}, "application/octet-stream"
			}},
		{name: "payload bytea empty", cols: withType("payload", oidBytea), set: map[string]pgoutputtest.Cell{"payload": text(`\x`)},
			want: func(m *schema.Message) { m.Payload, m.ContentType = []byte{}, "application/octet-stream" }},
		{name: "payload bytea escape format", cols: withType("payload", oidBytea), set: map[string]pgoutputtest.Cell{"payload": text(`abc\000`)},
			bad: &badRow{field: schema.FieldPayload, reason: "bytea is not in hex format", hasID: true}},
		{name: "payload bytea odd hex", cols: withType("payload", oidBytea), set: map[string]pgoutputtest.Cell{"payload": text(`\x012`)},
			bad: &badRow{field: schema.FieldPayload, reason: "bytea is not in hex format", hasID: true}},
		{name: "payload bytea bad hex", cols: withType("payload", oidBytea), set: map[string]pgoutputtest.Cell{"payload": text(`\x0g`)},
			bad: &badRow{field: schema.FieldPayload, reason: "bytea is not in hex format", hasID: true}},
		{name: "payload of unsupported type", cols: withType("payload", oidInt4), set: map[string]pgoutputtest.Cell{"payload": text("1")},
			bad: &badRow{field: schema.FieldPayload, reason: "unsupported column type (oid 23)", hasID: true}},

		// headers
		{name: "headers null", set: map[string]pgoutputtest.Cell{"headers": null},
			want: func(m *schema.Message) { m.Headers = nil }},
		{name: "headers unchanged toast", set: map[string]pgoutputtest.Cell{"headers": unchanged},
			want: func(m *schema.Message) { m.Headers = nil }},
		{name: "headers empty object", set: map[string]pgoutputtest.Cell{"headers": text(" { } ")},
			want: func(m *schema.Message) { m.Headers = nil }},
		{name: "headers sorted, non-strings skipped",
			set: map[string]pgoutputtest.Cell{"headers": text(`{"b": "2", "n": 5, "o": {"x": "y", "z": [1, "}"]}, "a": "1", "arr": ["s", {}], "t": true, "z": null, "e": ""}`)},
			want: func(m *schema.Message) {
				m.Headers = []schema.Header{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}, {Key: "e", Value: ""}}
			}},
		{name: "headers unescaped", cols: withType("headers", oidJSON),
			set: map[string]pgoutputtest.Cell{"headers": text(`{"k\"ey\\": "line\nnext \u00e9 \ud83d\ude00 \/ \b\f\r\t", "lone": "\ud800x"}`)},
			want: func(m *schema.Message) {
				m.Headers = []schema.Header{{Key: "k\"ey\\", Value: "line\nnext é 😀 / \b\f\r\t"}, {Key: "lone", Value: "\uFFFDx"}}
			}},
		{name: "headers repeated key, last wins", cols: withType("headers", oidJSON),
			set:  map[string]pgoutputtest.Cell{"headers": text(`{"k": "1", "j": "0", "k": "2"}`)},
			want: func(m *schema.Message) { m.Headers = []schema.Header{{Key: "j", Value: "0"}, {Key: "k", Value: "2"}} }},
		{name: "headers repeated key, last is not a string", cols: withType("headers", oidJSON),
			set:  map[string]pgoutputtest.Cell{"headers": text(`{"k": "1", "a": "x", "k": null, "b": 1}`)},
			want: func(m *schema.Message) { m.Headers = []schema.Header{{Key: "a", Value: "x"}} }},
		{name: "headers in a text column", cols: withType("headers", oidText),
			set:  map[string]pgoutputtest.Cell{"headers": text(`{"x":"y"}`)},
			want: func(m *schema.Message) { m.Headers = []schema.Header{{Key: "x", Value: "y"}} }},
		{name: "headers array", set: map[string]pgoutputtest.Cell{"headers": text(`[{"a": "b"}]`)},
			bad: &badRow{field: schema.FieldHeaders, reason: "not a JSON object", hasID: true}},
		{name: "headers string", set: map[string]pgoutputtest.Cell{"headers": text(`"a"`)},
			bad: &badRow{field: schema.FieldHeaders, reason: "not a JSON object", hasID: true}},
		{name: "headers invalid", cols: withType("headers", oidText), set: map[string]pgoutputtest.Cell{"headers": text(`{"a": `)},
			bad: &badRow{field: schema.FieldHeaders, reason: "not valid JSON", hasID: true}},
		{name: "headers of unsupported type", cols: withType("headers", oidInt8),
			bad: &badRow{field: schema.FieldHeaders, reason: "unsupported column type (oid 20)", hasID: true}},

		// occurred_at
		{name: "occurred at null", set: map[string]pgoutputtest.Cell{"occurred_at": null},
			want: func(m *schema.Message) { m.OccurredAt = time.Time{} }},
		{name: "occurred at half-hour offset", set: map[string]pgoutputtest.Cell{"occurred_at": text("2026-12-02 18:34:11.5+05:30")},
			want: func(m *schema.Message) { m.OccurredAt = at("2026-12-02T13:04:11.5Z") }},
		{name: "occurred at seconds offset", set: map[string]pgoutputtest.Cell{"occurred_at": text("2026-12-02 10:04:11-03:00:00")},
			want: func(m *schema.Message) { m.OccurredAt = at("2026-12-02T13:04:11Z") }},
		{name: "occurred at odd seconds offset", set: map[string]pgoutputtest.Cell{"occurred_at": text("1900-01-01 00:00:00+00:19:32")},
			want: func(m *schema.Message) { m.OccurredAt = at("1899-12-31T23:40:28Z") }},
		{name: "occurred at year 10000", set: map[string]pgoutputtest.Cell{"occurred_at": text("10000-01-01 00:00:00+00")},
			want: func(m *schema.Message) { m.OccurredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{name: "occurred at nanosecond digits", set: map[string]pgoutputtest.Cell{"occurred_at": text("2026-12-02 13:04:11.000000001+00")},
			want: func(m *schema.Message) { m.OccurredAt = at("2026-12-02T13:04:11.000000001Z") }},
		{name: "occurred at timestamp without zone", cols: withType("occurred_at", oidTimestamp),
			set:  map[string]pgoutputtest.Cell{"occurred_at": text("2026-12-02 13:04:11.123456")},
			want: func(m *schema.Message) {}},
		{name: "occurred at timestamp with offset", cols: withType("occurred_at", oidTimestamp),
			bad: &badRow{field: schema.FieldOccurredAt, reason: `not a timestamp: "2026-12-02 13:04:11.123456+00"`, hasID: true}},
		{name: "occurred at timestamptz without offset", set: map[string]pgoutputtest.Cell{"occurred_at": text("2026-12-02 13:04:11")},
			bad: &badRow{field: schema.FieldOccurredAt, reason: "not a timestamp", hasID: true}},
		{name: "occurred at infinity", set: map[string]pgoutputtest.Cell{"occurred_at": text("infinity")},
			bad: &badRow{field: schema.FieldOccurredAt, reason: `infinite timestamp "infinity"`, hasID: true}},
		{name: "occurred at minus infinity", set: map[string]pgoutputtest.Cell{"occurred_at": text("-infinity")},
			bad: &badRow{field: schema.FieldOccurredAt, reason: "infinite timestamp", hasID: true}},
		{name: "occurred at BC", set: map[string]pgoutputtest.Cell{"occurred_at": text("0044-03-15 12:00:00+00 BC")},
			bad: &badRow{field: schema.FieldOccurredAt, reason: "years BC are not supported", hasID: true}},
		{name: "occurred at February 30", set: map[string]pgoutputtest.Cell{"occurred_at": text("2026-02-30 00:00:00+00")},
			bad: &badRow{field: schema.FieldOccurredAt, reason: "not a timestamp", hasID: true}},
		{name: "occurred at hour 24", set: map[string]pgoutputtest.Cell{"occurred_at": text("2026-02-03 24:00:00+00")},
			bad: &badRow{field: schema.FieldOccurredAt, reason: "not a timestamp", hasID: true}},
		{name: "occurred at Postgres DateStyle", set: map[string]pgoutputtest.Cell{"occurred_at": text("Wed Dec 02 13:04:11.123456 2026 UTC")},
			bad: &badRow{field: schema.FieldOccurredAt, reason: "not a timestamp", hasID: true}},
		{name: "occurred at trailing text", set: map[string]pgoutputtest.Cell{"occurred_at": text("2026-12-02 13:04:11+00 ")},
			bad: &badRow{field: schema.FieldOccurredAt, reason: "not a timestamp", hasID: true}},
		{name: "occurred at of text type", cols: withType("occurred_at", oidText),
			bad: &badRow{field: schema.FieldOccurredAt, reason: "unsupported column type (oid 25)", hasID: true}},

		// relation layout
		{name: "optional columns absent", cols: without("aggregate_version", "headers", "occurred_at", "topic"),
			want: func(m *schema.Message) {
				m.AggregateVersion, m.HasVersion, m.Headers, m.OccurredAt = 0, false, nil, time.Time{}
			}},
		{name: "extra columns ignored", cols: func(c []pgoutputtest.Column) []pgoutputtest.Column {
			return append([]pgoutputtest.Column{{Name: "id", OID: oidInt8}}, append(c, pgoutputtest.Column{Name: "note", OID: oidText})...)
		}, set: map[string]pgoutputtest.Cell{"id": text("1"), "note": text("x")}},
		{name: "columns reversed", cols: func(c []pgoutputtest.Column) []pgoutputtest.Column {
			for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
				c[i], c[j] = c[j], c[i]
			}
			return c
		}},
		{name: "message id column missing", cols: without("message_id"),
			bad: &badRow{field: schema.FieldMessageID, reason: `missing from the table`}},
		{name: "aggregate type column missing", cols: without("aggregate_type"),
			bad: &badRow{field: schema.FieldAggregateType, reason: "missing", hasID: true}},
		{name: "aggregate id column missing", cols: without("aggregate_id"),
			bad: &badRow{field: schema.FieldAggregateID, reason: "missing", hasID: true}},
		{name: "type column missing", cols: without("type"),
			bad: &badRow{field: schema.FieldType, reason: "missing", hasID: true}},
		{name: "payload column missing", cols: without("payload"),
			bad: &badRow{field: schema.FieldPayload, reason: "missing", hasID: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cols := outboxColumns()
			if tt.cols != nil {
				cols = tt.cols(cols)
			}
			row := outboxRow()
			for k, v := range tt.set {
				row[k] = v
			}
			d := primed(t, cols)
			ev, err := d.Decode(pgoutputtest.Insert(outboxRel, rowFor(cols, row)))
			if tt.bad != nil {
				assertBadRow(t, err, tt.bad.field, tt.bad.reason, tt.bad.hasID)
				// The transaction stays open and decodable.
				mustDecode(t, d, pgoutputtest.Commit(finalLSN, endLSN, commitTime), KindCommit)
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			want := wantMessage(t)
			if tt.want != nil {
				tt.want(want)
			}
			assertMessage(t, ev.Message, want)
		})
	}
}

func assertBadRow(t *testing.T, err error, field schema.Field, reason string, hasID bool) {
	t.Helper()
	var bad *BadRowError
	if !errors.As(err, &bad) {
		t.Fatalf("err = %v; want a *BadRowError", err)
	}
	if bad.Field != field || !strings.Contains(bad.Reason, reason) || bad.HasID != hasID {
		t.Fatalf("bad row = %s field, reason %q, has id %v; want %s, %q, %v", bad.Field, bad.Reason, bad.HasID, field, reason, hasID)
	}
	if hasID && bad.MessageID != mustID(t, testID) {
		t.Fatalf("bad row id = %s; want %s", bad.MessageID, testID)
	}
	if bad.Column != field.String() || bad.CommitLSN != finalLSN {
		t.Fatalf("bad row column %q, lsn %s; want %q, %s", bad.Column, bad.CommitLSN, field.String(), finalLSN)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %q spans lines", err)
	}
}

func TestBadRowErrorText(t *testing.T) {
	tests := []struct {
		err  BadRowError
		want string
	}{
		{BadRowError{Field: schema.FieldAggregateID, Column: "aggregate_id", Reason: "empty", MessageID: "01000000-0000-0000-0000-0000000000ff", HasID: true, CommitLSN: finalLSN},
			`bad outbox row message_id=01000000-0000-0000-0000-0000000000ff in transaction 0/16B3748: column "aggregate_id": empty`},
		{BadRowError{Field: schema.FieldType, Column: "kind", Reason: "null", AggregateID: "order\n42", CommitLSN: finalLSN},
			`bad outbox row aggregate_id="order\n42" in transaction 0/16B3748: column "kind" (type): null`},
		{BadRowError{Field: schema.FieldType, Column: "type", Reason: "null", MessageID: "evt 7\n", HasID: true, CommitLSN: finalLSN},
			`bad outbox row message_id="evt 7\n" in transaction 0/16B3748: column "type": null`},
		{BadRowError{Field: schema.FieldMessageID, Column: "message_id", Reason: "a\nb"},
			`bad outbox row in transaction 0/0: column "message_id": a\nb`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q; want %q", got, tt.want)
		}
	}
	long := BadRowError{Column: "message_id", AggregateID: strings.Repeat("x", 100)}
	if got := long.Error(); !strings.Contains(got, strings.Repeat("x", 64)+`"...`) || strings.Contains(got, strings.Repeat("x", 65)) {
		t.Errorf("Error() = %q; want the aggregate id cut after 64 bytes", got)
	}
}

// TestStringsDoNotShareTheFrame: the Message's strings are copies, and its
// payload cannot grow into the rest of the frame.
func TestMessageMemory(t *testing.T) {
	d := primed(t, outboxColumns())
	msg := outboxInsert()
	m := mustDecode(t, d, msg, KindMessage).Message
	if cap(m.Payload) != len(m.Payload) {
		t.Fatalf("payload cap = %d; want %d (capped at its length)", cap(m.Payload), len(m.Payload))
	}
	for i := range msg {
		msg[i] = 0
	}
	if m.AggregateID != "42" || m.Type != "order.submitted.v1" || m.Headers[0].Value != "00-abc-def-01" {
		t.Fatalf("strings changed with the frame: %+v", m)
	}
}
