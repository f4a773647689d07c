package main

import (
	"io"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/schema"
)

const testPostgres = "postgres://127.0.0.1:1/x"

// debeziumColumns are Debezium's column names: walrelay's defaults for
// the columns its table lacks (version, headers, topic), which it allows
// to be absent.
func debeziumColumns() schema.Columns {
	c := schema.DefaultColumns()
	c.MessageID, c.AggregateType, c.AggregateID, c.Type, c.Payload, c.OccurredAt = "id", "aggregatetype", "aggregateid", "type", "payload", "timestamp"
	return c
}

func resolveVerb(t *testing.T, verb string, args ...string) config {
	t.Helper()
	o, s, err := parseOptions(verb, args, io.Discard, io.Discard)
	if err != nil {
		t.Fatalf("walrelay %s %q: %v", verb, args, err)
	}
	c, err := o.resolve(s)
	if err != nil {
		t.Fatalf("walrelay %s %q: resolve: %v", verb, args, err)
	}
	return c
}

// --preset debezium fills the columns, the span context, NULL payloads,
// the content type, the topic template and the id header, in every verb
// that has those flags.
func TestPresetDebeziumDefaults(t *testing.T) {
	for _, verb := range []string{"check", "run", "recover", "replay"} {
		c := resolveVerb(t, verb, "--postgres-url", testPostgres, "--table", "public.outboxevent", "--preset", "debezium")
		want := decoder.Config{Table: schema.Table{Schema: "public", Name: "outboxevent"}, Columns: debeziumColumns(),
			ContentType: "application/json", NullPayload: decoder.NullPayloadTombstone, SpanContextColumn: "tracingspancontext"}
		if c.Decoder != want {
			t.Errorf("%s: decoder config\n%+v; want\n%+v", verb, c.Decoder, want)
		}
		if c.Slot.Columns != debeziumColumns() {
			t.Errorf("%s: slot columns %+v; want Debezium's", verb, c.Slot.Columns)
		}
		if c.Sink.TopicTemplate != "outbox.event.{aggregate_type}" {
			t.Errorf("%s: topic template %q; want outbox.event.{aggregate_type}", verb, c.Sink.TopicTemplate)
		}
		if verb != "check" && c.Sink.MessageIDHeader != "id" {
			t.Errorf("%s: message id header %q; want id", verb, c.Sink.MessageIDHeader)
		}
		if !strings.HasPrefix(c.Preset, "debezium") || !strings.Contains(c.Preset, "--column-message-id id") {
			t.Errorf("%s: preset summary %q; want debezium and what it set", verb, c.Preset)
		}
	}
	c := resolveVerb(t, "schema", "--table", "public.outboxevent", "--preset", "debezium")
	if c.Schema.Columns != debeziumColumns() {
		t.Errorf("schema: columns %+v; want Debezium's", c.Schema.Columns)
	}
	c = resolveVerb(t, "init", "--postgres-url", testPostgres, "--preset", "debezium")
	if c.Slot.Columns != debeziumColumns() || c.Decoder.SpanContextColumn != "tracingspancontext" {
		t.Errorf("init: slot columns %+v, span context %q; want Debezium's", c.Slot.Columns, c.Decoder.SpanContextColumn)
	}
	c = resolveVerb(t, "dlq retry", "--postgres-url", testPostgres, "--preset", "debezium", "--all")
	if c.Sink.MessageIDHeader != "id" || c.Sink.TopicTemplate != "outbox.event.{aggregate_type}" {
		t.Errorf("dlq retry: id header %q, template %q; want the preset's", c.Sink.MessageIDHeader, c.Sink.TopicTemplate)
	}
}

// A flag on the command line or its variable wins over the preset, in
// either order.
func TestPresetExplicitFlagsWin(t *testing.T) {
	t.Setenv("WALRELAY_TOPIC_TEMPLATE", "events.{aggregate_type}")
	t.Setenv("WALRELAY_PRESET", "debezium")
	c := resolveVerb(t, "run", "--postgres-url", testPostgres, "--column-payload", "body", "--null-payload", "park",
		"--content-type", "application/octet-stream", "--message-id-header", "eventId")
	if c.Decoder.Columns.Payload != "body" || c.Decoder.Columns.MessageID != "id" {
		t.Errorf("columns %+v; want payload body (explicit), message id id (preset)", c.Decoder.Columns)
	}
	if c.Decoder.NullPayload != decoder.NullPayloadPark || c.Decoder.ContentType != "application/octet-stream" {
		t.Errorf("null payload %q, content type %q; want the explicit park and application/octet-stream", c.Decoder.NullPayload, c.Decoder.ContentType)
	}
	if c.Sink.TopicTemplate != "events.{aggregate_type}" || c.Sink.MessageIDHeader != "eventId" {
		t.Errorf("template %q, id header %q; want the variable's and the flag's", c.Sink.TopicTemplate, c.Sink.MessageIDHeader)
	}
	if !strings.Contains(c.Preset, "--column-payload (set explicitly)") || !strings.Contains(c.Preset, "--topic-template (set explicitly)") {
		t.Errorf("preset summary %q; want the explicit flags said as such", c.Preset)
	}
	// The preset given after the flag it would set changes nothing.
	t.Setenv("WALRELAY_PRESET", "")
	c = resolveVerb(t, "run", "--postgres-url", testPostgres, "--column-message-id", "event_id", "--preset", "debezium")
	if c.Decoder.Columns.MessageID != "event_id" || c.Decoder.Columns.AggregateID != "aggregateid" {
		t.Errorf("columns %+v; want event_id (explicit) and aggregateid (preset)", c.Decoder.Columns)
	}
}

func TestPresetWithoutOneChangesNothing(t *testing.T) {
	c := resolveVerb(t, "run", "--postgres-url", testPostgres)
	if c.Decoder.Columns != schema.DefaultColumns() || c.Decoder.SpanContextColumn != "" || c.Sink.MessageIDHeader != "" ||
		c.Sink.TopicTemplate != "outbox.{aggregate_type}" || c.Preset != "" {
		t.Errorf("without --preset: %+v, %+v, preset %q; want walrelay's defaults", c.Decoder, c.Sink, c.Preset)
	}
}

func TestUnknownPresetIsAnError(t *testing.T) {
	_, _, err := parseOptions("run", []string{"--postgres-url", testPostgres, "--preset", "debezum"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `--preset (WALRELAY_PRESET) is "debezum"; want one of debezium`) {
		t.Errorf("parse = %v; want an error naming --preset and the presets", err)
	}
}

// -h lists --preset, and with a preset before it, shows what it sets.
func TestPresetInHelp(t *testing.T) {
	for _, verb := range []string{"schema", "init", "check", "run", "recover", "replay"} {
		if h := help(t, verb); !strings.Contains(h, "--preset string   (WALRELAY_PRESET)") || !strings.Contains(h, "debezium: Debezium's Outbox Event Router") {
			t.Errorf("walrelay %s -h lacks --preset:\n%s", verb, h)
		}
	}
	h := help(t, "run", "--preset", "debezium")
	for _, want := range []string{`(set to "outbox.event.{aggregate_type}")`, `--column-message-id string   (WALRELAY_COLUMN_MESSAGE_ID)`, `(set to "tracingspancontext")`} {
		if !strings.Contains(h, want) {
			t.Errorf("walrelay run --preset debezium -h lacks %q:\n%s", want, h)
		}
	}
}

func TestBadMessageIDHeaderNamesTheFlag(t *testing.T) {
	o, s, err := parseOptions("run", []string{"--postgres-url", testPostgres, "--message-id-header", "ce_id"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = o.resolve(s); err == nil || !strings.Contains(err.Error(), "--message-id-header") {
		t.Errorf("resolve = %v; want an error naming --message-id-header", err)
	}
}
