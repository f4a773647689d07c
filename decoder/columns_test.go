package decoder

import (
	"fmt"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testkit/pgoutputtest"
	"github.com/walrelay/walrelay/schema"
)

// efTable and efColumns are the OutboxMessage entity as EF Core and Npgsql
// map it: quoted PascalCase names, a uuid aggregate id, a text payload and
// no aggregate type.
var efTable = schema.Table{Schema: "public", Name: "OutboxMessages"}

func efColumns() []Column {
	return []Column{
		{Name: "MessageId", Type: oidUUID}, {Name: "AggregateId", Type: oidUUID}, {Name: "AggregateVersion", Type: oidInt8},
		{Name: "Type", Type: oidText}, {Name: "Payload", Type: oidText}, {Name: "OccurredAtUtc", Type: oidTimestamptz},
		{Name: "AvailableAtUtc", Type: oidTimestamptz},
	}
}

func efConfig(aggTypeDefault string) Config {
	return Config{Table: efTable, AggregateTypeDefault: aggTypeDefault, Columns: schema.Columns{
		MessageID: "MessageId", AggregateType: "AggregateType", AggregateID: "AggregateId", AggregateVersion: "AggregateVersion",
		Type: "Type", Payload: "Payload", Headers: "Headers", OccurredAt: "OccurredAtUtc", Topic: "Topic",
	}}
}

// defaultColumns is the table of the default DDL, as Columns.
func defaultColumns() []Column {
	var out []Column
	for _, c := range outboxColumns() {
		out = append(out, Column{Name: c.Name, Type: c.OID})
	}
	return out
}

func columnsWithout(names ...string) []Column {
	var out []Column
	for _, c := range defaultColumns() {
		if !contains(names, c.Name) {
			out = append(out, c)
		}
	}
	return out
}

func columnsWithType(name string, oid uint32, typeName string) []Column {
	cols := defaultColumns()
	for i := range cols {
		if cols[i].Name == name {
			cols[i].Type, cols[i].TypeName = oid, typeName
		}
	}
	return cols
}

func TestCheckColumns(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		cols       []Column
		field      schema.Field // when an error is wanted
		found, fix string
	}{
		{name: "the default table", cols: defaultColumns()},
		{name: "optional columns absent", cols: columnsWithout("aggregate_version", "headers", "occurred_at", "topic")},
		{name: "message id missing", cols: columnsWithout("message_id"), field: schema.FieldMessageID,
			found: `column "message_id" is missing from public.outbox_messages`,
			fix:   "set schema.Columns.MessageID to the column that holds the message id"},
		{name: "aggregate id missing", cols: columnsWithout("aggregate_id"), field: schema.FieldAggregateID,
			found: `column "aggregate_id" is missing from public.outbox_messages`,
			fix:   "set schema.Columns.AggregateID to the column that holds the aggregate id"},
		{name: "type missing", cols: columnsWithout("type"), field: schema.FieldType,
			found: `column "type" is missing from public.outbox_messages`,
			fix:   "set schema.Columns.Type to the column that holds the type"},
		{name: "payload missing", cols: columnsWithout("payload"), field: schema.FieldPayload,
			found: `column "payload" is missing from public.outbox_messages`,
			fix:   "set schema.Columns.Payload to the column that holds the payload"},
		{name: "aggregate type missing without a default", cols: columnsWithout("aggregate_type"), field: schema.FieldAggregateType,
			found: `column "aggregate_type" is missing from public.outbox_messages`,
			fix:   "set schema.Columns.AggregateType to its column, or decoder.Config.AggregateTypeDefault to a constant"},
		{name: "aggregate type missing with a default", cfg: Config{AggregateTypeDefault: "order"}, cols: columnsWithout("aggregate_type")},
		{name: "aggregate type present with a default", cfg: Config{AggregateTypeDefault: "order"}, cols: defaultColumns()},
		{name: "payload of integer", cols: columnsWithType("payload", oidInt4, "integer"), field: schema.FieldPayload,
			found: `column "payload" of public.outbox_messages has type integer; a payload column is jsonb, json, text, varchar, char, name or bytea`,
			fix:   "set schema.Columns.Payload to a column of one of those types, or change the column's type"},
		{name: "headers of bigint, type name unknown", cols: columnsWithType("headers", oidInt8, ""), field: schema.FieldHeaders,
			found: `column "headers" of public.outbox_messages has type oid 20; a headers column is jsonb, json, text, varchar, char or name`},
		{name: "message id of bigint", cols: columnsWithType("message_id", oidInt8, "bigint")},
		{name: "message id of text", cols: columnsWithType("message_id", oidText, "text")},
		{name: "message id of varchar", cols: columnsWithType("message_id", oidVarchar, "character varying")},
		{name: "message id of timestamptz", cols: columnsWithType("message_id", oidTimestamptz, "timestamp with time zone"), field: schema.FieldMessageID,
			found: `column "message_id" of public.outbox_messages has type timestamp with time zone; a message id column is uuid, bigint, integer, smallint, text, varchar, char or name`},
		{name: "occurred_at of text", cols: columnsWithType("occurred_at", oidText, "text"), field: schema.FieldOccurredAt,
			found: `column "occurred_at" of public.outbox_messages has type text; an occurred_at column is timestamptz or timestamp`},
		{name: "a missing column comes before a bad type", cols: append(columnsWithType("payload", oidInt4, "integer")[:4], Column{Name: "payload", Type: oidInt4}),
			field: schema.FieldType, found: `column "type" is missing`},
		{name: "EF Core shape with a default", cfg: efConfig("order"), cols: efColumns()},
		{name: "EF Core shape without a default", cfg: efConfig(""), cols: efColumns(), field: schema.FieldAggregateType,
			found: `column "AggregateType" (aggregate_type) is missing from public.OutboxMessages`,
			fix:   "set schema.Columns.AggregateType to its column, or decoder.Config.AggregateTypeDefault to a constant"},
		{name: "EF Core shape, names in lower case", cfg: func() Config {
			c := efConfig("order")
			c.Columns.Payload = "payload"
			return c
		}(), cols: efColumns(), field: schema.FieldPayload,
			found: `column "payload" is missing from public.OutboxMessages`},
		{name: "EF Core shape, payload of integer", cfg: efConfig("order"), cols: func() []Column {
			c := efColumns()
			c[4].Type, c[4].TypeName = oidInt4, "integer"
			return c
		}(), field: schema.FieldPayload, found: `column "Payload" (payload) of public.OutboxMessages has type integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckColumns(tt.cfg, tt.cols)
			if tt.found == "" {
				if err != nil {
					t.Fatalf("CheckColumns = %v; want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckColumns = nil; want %q", tt.found)
			}
			if err.Field != tt.field || !strings.HasPrefix(err.Found(), tt.found) || tt.fix != "" && err.Fix() != tt.fix {
				t.Errorf("CheckColumns = field %s, found %q, fix %q; want %s, %q, %q", err.Field, err.Found(), err.Fix(), tt.field, tt.found, tt.fix)
			}
			if want := err.Found() + "; fix: " + err.Fix(); err.Error() != want || strings.Contains(want, "\n") {
				t.Errorf("Error() = %q; want %q on one line", err.Error(), want)
			}
		})
	}
}

// The stream judges a relation as CheckColumns judges the table: a table
// CheckColumns refuses makes every streamed row a bad row of the same
// field, and one it accepts decodes.
func TestCheckColumnsIsTheStreamsJudgement(t *testing.T) {
	cases := map[string][]Column{
		"full":                 defaultColumns(),
		"no aggregate type":    columnsWithout("aggregate_type"),
		"no type":              columnsWithout("type"),
		"no optional columns":  columnsWithout("aggregate_version", "headers", "occurred_at", "topic"),
		"payload of integer":   columnsWithType("payload", oidInt4, "integer"),
		"occurred_at of text":  columnsWithType("occurred_at", oidText, "text"),
		"headers of timestamp": columnsWithType("headers", oidTimestamptz, ""),
	}
	for name, cols := range cases {
		for _, def := range []string{"", "order"} {
			t.Run(fmt.Sprintf("%s, default %q", name, def), func(t *testing.T) {
				cfg := Config{AggregateTypeDefault: def}
				verdict := CheckColumns(cfg, cols)
				var pcols []pgoutputtest.Column
				for _, c := range cols {
					pcols = append(pcols, pgoutputtest.Column{Name: c.Name, OID: c.Type})
				}
				d := newDecoder(t, cfg)
				mustDecode(t, d, pgoutputtest.Begin(finalLSN, commitTime, xid), KindBegin)
				mustDecode(t, d, pgoutputtest.Relation(outboxRel, "public", "outbox_messages", pcols), KindSkip)
				row := outboxRow()
				row["occurred_at"] = null // valid text for an occurred_at of any type
				_, err := d.Decode(pgoutputtest.Insert(outboxRel, rowFor(pcols, row)))
				bad, isBad := AsBadRow(err)
				switch {
				case verdict == nil && err != nil:
					t.Fatalf("CheckColumns = nil, the stream: %v; want a message", err)
				case verdict != nil && (!isBad || bad.Field != verdict.Field || bad.Reason != verdict.reason()):
					t.Fatalf("CheckColumns = %v, the stream: %v; want a bad row of the same field and reason", verdict, err)
				}
				r, rerr := NewRowDecoder(cfg, cols)
				if rerr != nil {
					t.Fatal(rerr)
				}
				vals := make([][]byte, len(cols))
				for i, c := range cols {
					if cell := row[c.Name]; cell.Kind == 't' {
						vals[i] = []byte(cell.Data)
					}
				}
				_, err = r.Decode(vals, schema.Position{CommitLSN: finalLSN}, commitTime)
				if bad, isBad := AsBadRow(err); (verdict == nil) != (err == nil) || verdict != nil && (!isBad || bad.Field != verdict.Field) {
					t.Fatalf("CheckColumns = %v, RowDecoder: %v; want the same judgement", verdict, err)
				}
			})
		}
	}
}

func TestAbsentColumns(t *testing.T) {
	got := AbsentColumns(efConfig("order"), efColumns())
	want := []schema.Field{schema.FieldAggregateType, schema.FieldHeaders, schema.FieldTopic}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("AbsentColumns(EF Core shape) = %v; want %v", got, want)
	}
	if got := AbsentColumns(Config{}, defaultColumns()); len(got) != 0 {
		t.Errorf("AbsentColumns(default table) = %v; want none", got)
	}
}

func TestAggregateTypeDefaultIsValidated(t *testing.T) {
	for _, bad := range []string{"a\nb", "\xff", strings.Repeat("x", 201)} {
		_, err := New(Config{AggregateTypeDefault: bad})
		if err == nil || !strings.Contains(err.Error(), SettingAggregateTypeDefault) {
			t.Errorf("New(AggregateTypeDefault %q) = %v; want an error naming %s", bad, err, SettingAggregateTypeDefault)
		}
	}
	if _, err := New(Config{AggregateTypeDefault: "order"}); err != nil {
		t.Errorf("New(AggregateTypeDefault order) = %v; want nil", err)
	}
}

// The default is every row's aggregate type when the table has no such
// column, and a NULL aggregate type's; a row's own value wins, and an
// empty one stays empty. A bad row carries the default too, so that it
// blocks the aggregate its messages would have had.
func TestAggregateTypeDefault(t *testing.T) {
	tests := []struct {
		name    string
		cols    []pgoutputtest.Column
		aggType pgoutputtest.Cell
		def     string
		want    string // the message's aggregate type; "" with bad
		bad     string // the bad row's reason
	}{
		{name: "column absent", cols: without("aggregate_type")(outboxColumns()), def: "order", want: "order"},
		{name: "null", cols: outboxColumns(), aggType: null, def: "order", want: "order"},
		{name: "unchanged toast reads as null", cols: outboxColumns(), aggType: unchanged, def: "order", want: "order"},
		{name: "own value wins", cols: outboxColumns(), aggType: text("invoice"), def: "order", want: "invoice"},
		{name: "empty stays empty", cols: outboxColumns(), aggType: text(""), def: "order", bad: "empty, and the row has no topic"},
		{name: "null without a default", cols: outboxColumns(), aggType: null, bad: "null, and the row has no topic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{AggregateTypeDefault: tt.def})
			mustDecode(t, d, pgoutputtest.Begin(finalLSN, commitTime, xid), KindBegin)
			mustDecode(t, d, pgoutputtest.Relation(outboxRel, "public", "outbox_messages", tt.cols), KindSkip)
			row := outboxRow()
			if tt.aggType != (pgoutputtest.Cell{}) {
				row["aggregate_type"] = tt.aggType
			}
			ev, err := d.Decode(pgoutputtest.Insert(outboxRel, rowFor(tt.cols, row)))
			if tt.bad != "" {
				assertBadRow(t, err, schema.FieldAggregateType, tt.bad, true)
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if ev.Message.AggregateType != tt.want {
				t.Errorf("aggregate type = %q; want %q", ev.Message.AggregateType, tt.want)
			}
		})
	}
}

func TestBadRowCarriesTheDefaultAggregateType(t *testing.T) {
	cols := without("aggregate_type")(outboxColumns())
	row := outboxRow()
	row["headers"] = text(`["not", "an object"]`)
	d := newDecoder(t, Config{AggregateTypeDefault: "order"})
	mustDecode(t, d, pgoutputtest.Begin(finalLSN, commitTime, xid), KindBegin)
	mustDecode(t, d, pgoutputtest.Relation(outboxRel, "public", "outbox_messages", cols), KindSkip)
	_, err := d.Decode(pgoutputtest.Insert(outboxRel, rowFor(cols, row)))
	bad, ok := AsBadRow(err)
	if !ok || bad.Field != schema.FieldHeaders {
		t.Fatalf("Decode = %v; want a bad row of the headers", err)
	}
	if got, want := bad.DeadLetter().Aggregate, (schema.Aggregate{Type: "order", ID: "42"}); got != want {
		t.Errorf("bad row's aggregate = %+v; want %+v", got, want)
	}
	if _, ok := bad.Row["aggregate_type"]; ok {
		t.Errorf("bad row's columns = %v; want only the table's (no aggregate_type)", bad.Row)
	}
	r, err := NewRowDecoder(Config{AggregateTypeDefault: "order"}, columnsWithout("aggregate_type"))
	if err != nil {
		t.Fatal(err)
	}
	vals := [][]byte{[]byte(testID), []byte("42"), []byte("7"), []byte("order.submitted.v1"), []byte(`{}`), []byte(`[1]`), nil, nil}
	_, err = r.Decode(vals, schema.Position{CommitLSN: finalLSN}, commitTime)
	if bad, ok := AsBadRow(err); !ok || bad.AggregateType != "order" || bad.AggregateID != "42" {
		t.Errorf("RowDecoder.Decode = %v; want a bad row of aggregate order/42", err)
	}
}
