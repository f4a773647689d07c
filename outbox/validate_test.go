package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/schema"
)

func good() *Message {
	return &Message{AggregateType: "order", AggregateID: "o-1", Type: "order.submitted.v1", Payload: map[string]int{"n": 1}}
}

func TestPrepareRefusesBadMessages(t *testing.T) {
	w, err := New(Config{MaxPayloadBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(m *Message)
		field  Field
		reason string // a part of the reason
	}{
		{"no aggregate type", func(m *Message) { m.AggregateType = "" }, FieldAggregateType, "is empty"},
		{"no aggregate id", func(m *Message) { m.AggregateID = "" }, FieldAggregateID, "is empty"},
		{"no type", func(m *Message) { m.Type = "" }, FieldType, "is empty"},
		{"aggregate id not UTF-8", func(m *Message) { m.AggregateID = "o-\xff" }, FieldAggregateID, "UTF-8"},
		{"type with NUL", func(m *Message) { m.Type = "a\x00b" }, FieldType, "NUL"},
		{"nil payload", func(m *Message) { m.Payload = nil }, FieldPayload, "is nil"},
		{"payload does not encode", func(m *Message) { m.Payload = math.Inf(1) }, FieldPayload, "does not encode"},
		{"payload channel", func(m *Message) { m.Payload = make(chan int) }, FieldPayload, "does not encode"},
		{"raw payload not JSON", func(m *Message) { m.Payload = json.RawMessage(`{"a":`) }, FieldPayload, "not valid JSON"},
		{"bytes payload not JSON", func(m *Message) { m.Payload = []byte("hello") }, FieldPayload, "not valid JSON"},
		{"empty raw payload", func(m *Message) { m.Payload = json.RawMessage(nil) }, FieldPayload, "not valid JSON"},
		{"payload over limit", func(m *Message) { m.Payload = strings.Repeat("x", 63) }, FieldPayload, "is 65 bytes, over the limit of 64"},
		{"jsonb form over limit", func(m *Message) {
			m.Payload = json.RawMessage(`[1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2]`)
		}, FieldPayload, "is 96 bytes, over the limit of 64"},
		{"empty header key", func(m *Message) { m.Headers = map[string]string{"": "x"} }, FieldHeaders, "empty key"},
		{"header value not UTF-8", func(m *Message) { m.Headers = map[string]string{"k": "\xc3"} }, FieldHeaders, `value of "k" is not valid UTF-8`},
		{"header key with NUL", func(m *Message) { m.Headers = map[string]string{"k\x00": "v"} }, FieldHeaders, "NUL"},
		{"reserved header", func(m *Message) { m.Headers = map[string]string{"CE_ID": "x"} }, FieldHeaders, "relay sets itself"},
		{"reserved content-type", func(m *Message) { m.Headers = map[string]string{"content-type": "text/plain"} }, FieldHeaders, "relay sets itself"},
		{"ce_ key not an attribute name", func(m *Message) { m.Headers = map[string]string{"ce_Bad-Name": "x"} }, FieldHeaders, `entry "ce_Bad-Name": not a CloudEvents attribute`},
		{"ce_dataschema not a URI", func(m *Message) { m.Headers = map[string]string{"ce_dataschema": "order v1"} }, FieldHeaders, "must be an absolute URI"},
		{"ce_datacontenttype", func(m *Message) { m.Headers = map[string]string{"ce_datacontenttype": "text/plain"} }, FieldHeaders, "compete with content-type"},
		{"topic with space", func(m *Message) { m.Topic = "a b" }, FieldTopic, "Kafka allows only"},
		{"topic dot", func(m *Message) { m.Topic = ".." }, FieldTopic, "not a legal"},
		{"topic too long", func(m *Message) { m.Topic = strings.Repeat("t", 250) }, FieldTopic, "250 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := good()
			tt.change(bad)
			msgs := []*Message{good(), good(), bad, good()}
			_, err := w.prepare(context.Background(), msgs)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("prepare: got %v; want a *ValidationError", err)
			}
			if ve.Index != 2 || ve.Field != tt.field || !strings.Contains(ve.Reason+": "+errString(ve.Err), tt.reason) {
				t.Fatalf("got message %d, field %s, reason %q; want message 2, field %s, reason with %q", ve.Index, ve.Field, ve.Reason, tt.field, tt.reason)
			}
			for i, m := range msgs {
				if m.ID != "" {
					t.Errorf("message %d got id %s from a refused call; want it untouched", i, m.ID)
				}
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestPrepareRefusesNilAndDuplicateIDs(t *testing.T) {
	w, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	var ve *ValidationError
	_, err = w.prepare(context.Background(), []*Message{good(), nil})
	if !errors.As(err, &ve) || ve.Index != 1 || ve.Field != FieldMessage {
		t.Fatalf("nil message: got %v; want a ValidationError for message 1", err)
	}
	if want := "outbox: message 1: Message is nil"; err.Error() != want {
		t.Errorf("got %q; want %q", err.Error(), want)
	}
	a, b := good(), good()
	a.ID = NewID()
	b.ID = a.ID
	_, err = w.prepare(context.Background(), []*Message{good(), a, b})
	if !errors.As(err, &ve) || ve.Index != 2 || ve.Field != FieldID {
		t.Fatalf("duplicate id: got %v; want a ValidationError for message 2, field ID", err)
	}
}

func TestPrepareAcceptsEdgeCases(t *testing.T) {
	w, err := New(Config{MaxPayloadBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	m := good()
	m.Payload = json.RawMessage(`{"a": 1}`) // 8 bytes, 10 as jsonb text: at the limit
	m.Topic = "orders.v1-EU_x"
	m.Headers = map[string]string{"tenant": "ünï", "x-empty": "", "ce_tenant": "acme", "ce_dataschema": "https://example.com/order.json"}
	rows, err := w.prepare(context.Background(), []*Message{m})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if string(rows[0].payload) != `{"a": 1}` {
		t.Errorf("payload %s; want the raw message as it is", rows[0].payload)
	}
	if rows[0].version != nil || rows[0].occurredAt != nil {
		t.Errorf("version %v, occurred at %v; want nil (null, now())", rows[0].version, rows[0].occurredAt)
	}
	if rows[0].topic != "orders.v1-EU_x" {
		t.Errorf("topic %v; want orders.v1-EU_x", rows[0].topic)
	}
}

func TestPayloadSizeCountsTheJSONBTextForm(t *testing.T) {
	tests := []struct {
		in   string
		want int // len of PostgreSQL's '<in>'::jsonb::text, or of in when longer
	}{
		{`{}`, 2},
		{`"a,b:c"`, 7},
		{`{"a":1}`, 8},
		{`{"a":[1,2],"b":"x, y"}`, 26},
		{`{ "a" : 1 }`, 11},
		{`{"a\"": ","}`, 12},
		{"[1,\n 2]", 7},
		{`[[],{}]`, 8},
	}
	for _, tt := range tests {
		if got := payloadSize([]byte(tt.in)); got != tt.want {
			t.Errorf("payloadSize(%s) = %d; want %d", tt.in, got, tt.want)
		}
	}
}

func TestNewValidatesConfig(t *testing.T) {
	bad := []Config{
		{Table: schema.Table{Schema: "public", Name: "x\x00y"}},
		{Table: schema.Table{Schema: strings.Repeat("s", 64), Name: "t"}},
		{MaxPayloadBytes: -1},
		{Columns: schema.Columns{Payload: "message_id"}},
		{Columns: schema.Columns{Topic: strings.Repeat("c", 64)}},
	}
	for i, c := range bad {
		if _, err := New(c); err == nil {
			t.Errorf("config %d %+v: got nil error; want one", i, c)
		}
	}
	w, err := New(Config{Table: schema.Table{Name: "events"}, Columns: schema.Columns{Payload: "body"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `INSERT INTO "public"."events" ("message_id", "aggregate_type", "aggregate_id", "aggregate_version", "type", "body", "headers", "occurred_at", "topic") VALUES ` +
		`($1, $2, $3, $4, $5, $6, $7, COALESCE($8, now()), $9), ($10, $11, $12, $13, $14, $15, $16, COALESCE($17, now()), $18)`
	if got := w.insert.forRows(2); got != want {
		t.Errorf("statement for 2 rows:\n got %s\nwant %s", got, want)
	}
	if w.maxPayload != DefaultMaxPayloadBytes {
		t.Errorf("max payload %d; want %d", w.maxPayload, DefaultMaxPayloadBytes)
	}
}
