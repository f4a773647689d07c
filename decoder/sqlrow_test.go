package decoder

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit/pgoutputtest"
	"github.com/walrelay/walrelay/schema"
)

// customColumns names every field otherwise than the default DDL, for a
// table that is not the default either.
var customColumns = schema.Columns{
	MessageID: "event_id", AggregateType: "stream", AggregateID: "stream_id",
	AggregateVersion: "version", Type: "event_type", Payload: "body",
	Headers: "meta", OccurredAt: "at", Topic: "destination",
}

// sqlCase is one outbox row, decoded both from a pgoutput stream and as
// read by SQL.
type sqlCase struct {
	name string
	// cols changes outboxColumns; nil keeps them.
	cols func([]pgoutputtest.Column) []pgoutputtest.Column
	// set changes outboxRow.
	set map[string]pgoutputtest.Cell
	// custom renames the table and every column (customColumns), in the
	// Config as in the rows.
	custom bool
	// bad is the field of a bad row; empty for a good row.
	bad string
}

func sqlCases() []sqlCase {
	var (
		setCell = func(kv ...string) map[string]pgoutputtest.Cell {
			m := map[string]pgoutputtest.Cell{}
			for i := 0; i < len(kv); i += 2 {
				m[kv[i]] = text(kv[i+1])
			}
			return m
		}
		setNull = func(names ...string) map[string]pgoutputtest.Cell {
			m := map[string]pgoutputtest.Cell{}
			for _, n := range names {
				m[n] = null
			}
			return m
		}
		reversed = func(c []pgoutputtest.Column) []pgoutputtest.Column {
			for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
				c[i], c[j] = c[j], c[i]
			}
			return c
		}
	)
	return []sqlCase{
		{name: "defaults: uuid id, jsonb payload and headers, timestamptz"},
		{name: "id as text", cols: withType("message_id", oidText), set: setCell("message_id", "{"+strings.ToUpper(testID)+"}")},
		{name: "aggregate id of uuid type", cols: withType("aggregate_id", oidUUID), set: setCell("aggregate_id", testID)},
		{name: "varchar names", cols: func(c []pgoutputtest.Column) []pgoutputtest.Column {
			return withType("type", oidVarchar)(withType("aggregate_type", oidVarchar)(c))
		}},
		{name: "payload json", cols: withType("payload", oidJSON), set: setCell("payload", ` {"a" : [1, "x"]} `)},
		{name: "payload text", cols: withType("payload", oidText), set: setCell("payload", "hello\n")},
		{name: "payload varchar empty", cols: withType("payload", oidVarchar), set: setCell("payload", "")},
		{name: "payload bytea", cols: withType("payload", oidBytea), set: setCell("payload", `\x00017fFF`)},
		{name: "payload bytea empty", cols: withType("payload", oidBytea), set: setCell("payload", `\x`)},
		{name: "headers json, escaped, repeated keys", cols: withType("headers", oidJSON),
			set: setCell("headers", `{"k\"ey": "v\u00e9\ud83d\ude00", "n": [1, {"x": "}"}], "a": "b", "a": "c"}`)},
		{name: "headers text", cols: withType("headers", oidText), set: setCell("headers", `{"x":"y"}`)},
		{name: "occurred at timestamp", cols: withType("occurred_at", oidTimestamp), set: setCell("occurred_at", "2026-12-02 13:04:11.123456")},
		{name: "occurred at offset", set: setCell("occurred_at", "2026-12-02 18:34:11.5+05:30")},
		{name: "topic", set: setCell("topic", "orders.v1")},
		{name: "aggregate type null with topic", set: map[string]pgoutputtest.Cell{"aggregate_type": null, "topic": text("orders.v1")}},
		{name: "optional columns null", set: setNull("aggregate_version", "headers", "occurred_at", "topic")},
		{name: "optional columns absent", cols: without("aggregate_version", "headers", "occurred_at", "topic")},
		{name: "columns reversed", cols: reversed},
		{name: "extra columns", cols: func(c []pgoutputtest.Column) []pgoutputtest.Column {
			return append([]pgoutputtest.Column{{Name: "id", OID: oidInt8}}, append(c, pgoutputtest.Column{Name: "note", OID: oidText})...)
		}, set: setCell("id", "1", "note", "x")},
		{name: "custom names", custom: true, set: setCell("topic", "orders.v1")},
		{name: "custom names reversed, optional absent", custom: true,
			cols: func(c []pgoutputtest.Column) []pgoutputtest.Column { return reversed(without("headers", "topic")(c)) }},

		{name: "id any text", cols: withType("message_id", oidText), set: setCell("message_id", "order-42")},
		{name: "id bigint", cols: withType("message_id", oidInt8), set: setCell("message_id", "42")},
		{name: "id empty", cols: withType("message_id", oidVarchar), set: setCell("message_id", ""), bad: "message_id"},
		{name: "id of unsupported type", cols: withType("message_id", oidJSONB), set: setCell("message_id", `"x"`), bad: "message_id"},
		{name: "id null", set: setNull("message_id"), bad: "message_id"},
		{name: "aggregate id empty", set: setCell("aggregate_id", ""), bad: "aggregate_id"},
		{name: "aggregate id null", set: setNull("aggregate_id"), bad: "aggregate_id"},
		{name: "type empty", set: setCell("type", ""), bad: "type"},
		{name: "aggregate type null without topic", set: setNull("aggregate_type"), bad: "aggregate_type"},
		{name: "version not an integer", set: setCell("aggregate_version", "7.0"), bad: "aggregate_version"},
		{name: "payload null", set: setNull("payload"), bad: "payload"},
		{name: "payload bytea escape format", cols: withType("payload", oidBytea), set: setCell("payload", `abc\000`), bad: "payload"},
		{name: "payload of unsupported type", cols: withType("payload", oidInt4), set: setCell("payload", "1"), bad: "payload"},
		{name: "headers invalid", cols: withType("headers", oidText), set: setCell("headers", `{"a": `), bad: "headers"},
		{name: "headers array", set: setCell("headers", `[{"a": "b"}]`), bad: "headers"},
		{name: "occurred at infinity", set: setCell("occurred_at", "infinity"), bad: "occurred_at"},
		{name: "occurred at of text type", cols: withType("occurred_at", oidText), bad: "occurred_at"},
		{name: "message id column missing", cols: without("message_id"), bad: "message_id"},
		{name: "payload column missing", cols: without("payload"), bad: "payload"},
		{name: "custom names, aggregate id empty", custom: true, set: setCell("aggregate_id", ""), bad: "aggregate_id"},
		{name: "custom names, type column missing", custom: true, cols: without("type"), bad: "type"},
	}
}

// layout returns the case's config, columns and row, renamed when custom.
func (tt sqlCase) layout() (Config, []pgoutputtest.Column, map[string]pgoutputtest.Cell) {
	cols := outboxColumns()
	if tt.cols != nil {
		cols = tt.cols(cols)
	}
	row := outboxRow()
	for k, v := range tt.set {
		row[k] = v
	}
	if !tt.custom {
		return Config{}, cols, row
	}
	rename := map[string]string{}
	defaults, custom := schema.DefaultColumns().Names(), customColumns.Names()
	for f := range defaults {
		rename[defaults[f]] = custom[f]
	}
	renamed := map[string]pgoutputtest.Cell{}
	for k, v := range row {
		renamed[rename[k]] = v
	}
	for i := range cols {
		cols[i].Name = rename[cols[i].Name]
	}
	return Config{Table: schema.Table{Schema: "app", Name: "events"}, Columns: customColumns}, cols, renamed
}

// TestRowDecoderMatchesStream: a row read by SQL decodes to the Message or
// the *BadRowError the same row gives on the stream, as the third row of
// its transaction.
func TestRowDecoderMatchesStream(t *testing.T) {
	for _, tt := range sqlCases() {
		t.Run(tt.name, func(t *testing.T) {
			cfg, cols, row := tt.layout()
			cells := rowFor(cols, row)
			want, wantErr, commit := decodeThirdInStream(t, cfg, cols, cells)
			checkOutcome(t, want, wantErr, tt.bad)

			r, err := NewRowDecoder(cfg, sqlColumns(cols))
			if err != nil {
				t.Fatalf("NewRowDecoder: %v", err)
			}
			got, gotErr := r.Decode(sqlValues(t, cells), schema.Position{CommitLSN: finalLSN, Seq: 2}, commit)
			if wantErr != nil {
				bad, ok := AsBadRow(gotErr)
				if !ok || !reflect.DeepEqual(bad, wantErr) {
					t.Fatalf("RowDecoder error =\n%#v\nwant\n%#v", gotErr, wantErr)
				}
				return
			}
			if gotErr != nil {
				t.Fatalf("RowDecoder: %v", gotErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("RowDecoder message =\n%#v\nwant\n%#v", got, want)
			}
		})
	}
}

// decodeThirdInStream decodes cells as the third outbox row of a
// transaction, returning its Message or *BadRowError and the transaction's
// commit time as the Begin gave it.
func decodeThirdInStream(t *testing.T, cfg Config, cols []pgoutputtest.Column, cells []pgoutputtest.Cell) (*schema.Message, *BadRowError, time.Time) {
	t.Helper()
	d := newDecoder(t, cfg)
	begin := mustDecode(t, d, pgoutputtest.Begin(finalLSN, commitTime, xid), KindBegin)
	name := cfg.Table
	if name == (schema.Table{}) {
		name = schema.DefaultConfig().Table
	}
	mustDecode(t, d, pgoutputtest.Relation(outboxRel, name.Schema, name.Name, cols), KindSkip)
	insert := pgoutputtest.Insert(outboxRel, cells)
	var (
		ev  Event
		err error
	)
	for range 3 {
		if ev, err = d.Decode(insert); err != nil && !IsBadRow(err) {
			t.Fatalf("stream Decode: %v", err)
		}
	}
	bad, _ := AsBadRow(err)
	return ev.Message, bad, begin.CommitTime
}

// checkOutcome fails unless the stream decoded the row as the case says:
// a bad row of field bad, or a message when bad is empty.
func checkOutcome(t *testing.T, m *schema.Message, bad *BadRowError, field string) {
	t.Helper()
	switch {
	case field == "" && bad != nil:
		t.Fatalf("stream: %v; want a message", bad)
	case field == "" && m == nil:
		t.Fatal("stream gave no message")
	case field != "" && (bad == nil || bad.Field.String() != field):
		t.Fatalf("stream: message %v, error %v; want a bad %s", m, bad, field)
	case bad != nil && bad.Seq != 2, m != nil && m.Seq != 2:
		t.Fatal("stream: the row is not the third of its transaction")
	}
}

func sqlColumns(cols []pgoutputtest.Column) []Column {
	out := make([]Column, len(cols))
	for i, c := range cols {
		out[i] = Column{Name: c.Name, Type: c.OID}
	}
	return out
}

// sqlValues is a row as pgx hands over its raw text values: nil for null.
func sqlValues(t testing.TB, cells []pgoutputtest.Cell) [][]byte {
	t.Helper()
	vals := make([][]byte, len(cells))
	for i, c := range cells {
		switch c.Kind {
		case 't':
			vals[i] = []byte(c.Data)
		case 'n':
		default:
			t.Fatalf("cell kind %q cannot be read by SQL", c.Kind)
		}
	}
	return vals
}

// TestRowDecoderCopies: nothing the RowDecoder returns or keeps refers to
// the values it was given, which the caller reuses for the next row.
func TestRowDecoderCopies(t *testing.T) {
	for _, payloadType := range []uint32{oidJSONB, oidJSON, oidText, oidBytea} {
		cols := withType("payload", payloadType)(outboxColumns())
		row := outboxRow()
		row["topic"] = text("orders.v1")
		if payloadType == oidBytea {
			row["payload"] = text(`\x7b7d`)
		}
		r, err := NewRowDecoder(Config{}, sqlColumns(cols))
		if err != nil {
			t.Fatal(err)
		}
		vals := sqlValues(t, rowFor(cols, row))
		m, err := r.Decode(vals, schema.Position{CommitLSN: finalLSN}, commitTime)
		if err != nil {
			t.Fatalf("oid %d: Decode: %v", payloadType, err)
		}
		want := *m
		want.Payload = bytes.Clone(m.Payload)
		for _, v := range vals {
			for i := range v {
				v[i] = 'x'
			}
		}
		if !reflect.DeepEqual(*m, want) {
			t.Fatalf("oid %d: message changed with the values:\n%#v\nwant\n%#v", payloadType, *m, want)
		}
		if cap(m.Payload) != len(m.Payload) {
			t.Fatalf("oid %d: payload cap = %d; want %d", payloadType, cap(m.Payload), len(m.Payload))
		}
		for i, v := range r.scratch {
			if v.b != nil {
				t.Fatalf("oid %d: the decoder keeps value %d after Decode", payloadType, i)
			}
		}
	}
}

// TestRowDecoderBadRowCopies: a bad row's error keeps copies of the row.
func TestRowDecoderBadRowCopies(t *testing.T) {
	r, err := NewRowDecoder(Config{}, sqlColumns(outboxColumns()))
	if err != nil {
		t.Fatal(err)
	}
	row := outboxRow()
	row["type"] = text("")
	vals := sqlValues(t, rowFor(outboxColumns(), row))
	_, err = r.Decode(vals, schema.Position{CommitLSN: finalLSN}, commitTime)
	bad, ok := AsBadRow(err)
	if !ok {
		t.Fatalf("err = %v; want a bad row", err)
	}
	for _, v := range vals {
		for i := range v {
			v[i] = 'x'
		}
	}
	if bad.AggregateID != "42" || bad.AggregateType != "order" || *bad.Row["payload"] != `{"total": 10}` {
		t.Fatalf("bad row changed with the values: %+v", bad)
	}
}

// TestRowDecoderMisuse: a row with the wrong number of values and a bad
// config are plain errors.
func TestRowDecoderMisuse(t *testing.T) {
	cols := sqlColumns(outboxColumns())
	if _, err := NewRowDecoder(Config{Columns: schema.Columns{MessageID: "id"}}, cols); err == nil || !strings.Contains(err.Error(), "column name is empty") {
		t.Fatalf("NewRowDecoder with a bad config: err = %v; want column name is empty", err)
	}
	r, err := NewRowDecoder(Config{}, cols)
	if err != nil {
		t.Fatal(err)
	}
	vals := sqlValues(t, rowFor(outboxColumns(), outboxRow()))
	for _, n := range []int{len(vals) - 1, len(vals) + 1, 0} {
		vs := append(vals[:len(vals):len(vals)], []byte("extra"))[:n]
		_, err := r.Decode(vs, schema.Position{CommitLSN: finalLSN}, commitTime)
		if err == nil || IsBadRow(err) || !strings.Contains(err.Error(), "values for 9 columns") {
			t.Fatalf("Decode of %d values: err = %v; want a plain error about the count", n, err)
		}
	}
}

// TestPayloadChoices: the payload column's types, Config.ContentType and
// Config.NullPayload give the same Message on the stream and by SQL.
func TestPayloadChoices(t *testing.T) {
	const (
		jsonType   = "application/json"
		textType   = "text/plain; charset=utf-8"
		binaryType = "application/octet-stream"
		given      = "application/vnd.acme.order+json; charset=utf-8"
	)
	tests := []struct {
		name      string
		oid       uint32
		cell      pgoutputtest.Cell
		cfg       Config
		payload   []byte // nil: a tombstone
		mediaType string
		bad       string // the reason of a bad row
	}{
		{name: "jsonb", oid: oidJSONB, cell: text(`{"a": 1}`), payload: []byte(`{"a": 1}`), mediaType: jsonType},
		{name: "json", oid: oidJSON, cell: text(`{"a" :1}`), payload: []byte(`{"a" :1}`), mediaType: jsonType},
		{name: "text", oid: oidText, cell: text(`{"a":1}`), payload: []byte(`{"a":1}`), mediaType: textType},
		{name: "varchar", oid: oidVarchar, cell: text("x"), payload: []byte("x"), mediaType: textType},
		{name: "bpchar", oid: oidBpchar, cell: text("ab  "), payload: []byte("ab  "), mediaType: textType},
		{name: "name", oid: oidName, cell: text("n"), payload: []byte("n"), mediaType: textType},
		{name: "bytea", oid: oidBytea, cell: text(`\x7b7d00`), payload: []byte{'{', '}', 0}, mediaType: binaryType},
		{name: "text as given", oid: oidText, cell: text(`{"a":1}`), cfg: Config{ContentType: given},
			payload: []byte(`{"a":1}`), mediaType: given},
		{name: "bytea as given", oid: oidBytea, cell: text(`\x01`), cfg: Config{ContentType: given},
			payload: []byte{1}, mediaType: given},
		{name: "empty text is no tombstone", oid: oidText, cell: text(""), cfg: Config{NullPayload: NullPayloadTombstone},
			payload: []byte{}, mediaType: textType},
		{name: "null, parked by default", oid: oidJSONB, cell: null, bad: "null"},
		{name: "null, parked", oid: oidText, cell: null, cfg: Config{NullPayload: NullPayloadPark}, bad: "null"},
		{name: "null jsonb as a tombstone", oid: oidJSONB, cell: null, cfg: Config{NullPayload: NullPayloadTombstone}},
		{name: "null bytea as a tombstone, no content type given", oid: oidBytea, cell: null,
			cfg: Config{NullPayload: NullPayloadTombstone, ContentType: given}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cols := withType("payload", tt.oid)(outboxColumns())
			row := outboxRow()
			row["payload"] = tt.cell
			cells := rowFor(cols, row)
			streamed, bad, commit := decodeThirdInStream(t, tt.cfg, cols, cells)
			r, err := NewRowDecoder(tt.cfg, sqlColumns(cols))
			if err != nil {
				t.Fatalf("NewRowDecoder: %v", err)
			}
			read, readErr := r.Decode(sqlValues(t, cells), schema.Position{CommitLSN: finalLSN, Seq: 2}, commit)
			if tt.bad != "" {
				readBad, _ := AsBadRow(readErr)
				if bad == nil || bad.Field != schema.FieldPayload || bad.Reason != tt.bad || !reflect.DeepEqual(readBad, bad) {
					t.Fatalf("stream: %v, by SQL: %v; want a bad payload: %s", bad, readErr, tt.bad)
				}
				return
			}
			if bad != nil || readErr != nil {
				t.Fatalf("stream: %v, by SQL: %v; want a message", bad, readErr)
			}
			for way, m := range map[string]*schema.Message{"stream": streamed, "SQL": read} {
				if m.Tombstone != (tt.payload == nil) || (m.Payload == nil) != (tt.payload == nil) ||
					!bytes.Equal(m.Payload, tt.payload) || m.ContentType != tt.mediaType {
					t.Errorf("%s: payload %q (nil %v), tombstone %v, content type %q; want %q (nil %v), tombstone %v, %q", way,
						m.Payload, m.Payload == nil, m.Tombstone, m.ContentType, tt.payload, tt.payload == nil, tt.payload == nil, tt.mediaType)
				}
			}
		})
	}
}
