package main

import (
	"io"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/schema"
)

// The column flags and --aggregate-type-default reach the decoder and the
// slot's rules alike, for every verb that judges or reads the table: init
// among them, since it validates the table.
func TestColumnFlagsReachTheSlotAndTheDecoder(t *testing.T) {
	args := []string{"--postgres-url", "postgres://127.0.0.1:1/x", "--table", `public.OutboxMessages`,
		"--column-message-id", "MessageId", "--column-aggregate-id", "AggregateId", "--column-payload", "Payload",
		"--aggregate-type-default", "order"}
	for _, verb := range []string{"init", "check", "run", "recover"} {
		o, s, err := parseOptions(verb, args, io.Discard, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", verb, err)
		}
		c, err := o.resolve(s)
		if err != nil {
			t.Fatalf("%s: resolve: %v", verb, err)
		}
		want := schema.DefaultColumns()
		want.MessageID, want.AggregateID, want.Payload = "MessageId", "AggregateId", "Payload"
		if c.Slot.Columns != want || c.Slot.AggregateTypeDefault != "order" {
			t.Errorf("%s: slot columns %+v, default %q; want %+v, order", verb, c.Slot.Columns, c.Slot.AggregateTypeDefault, want)
		}
		if c.Decoder.Columns != want || c.Decoder.AggregateTypeDefault != "order" || c.Decoder.Table.Name != "OutboxMessages" {
			t.Errorf("%s: decoder config %+v; want the table, its columns and the default", verb, c.Decoder)
		}
	}
}

func TestBadAggregateTypeDefaultNamesTheFlag(t *testing.T) {
	o, s, err := parseOptions("run", []string{"--postgres-url", "postgres://127.0.0.1:1/x", "--aggregate-type-default", "a\tb"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, err = o.resolve(s)
	if err == nil || !strings.Contains(err.Error(), "--aggregate-type-default") || strings.Contains(err.Error(), decoder.SettingAggregateTypeDefault) {
		t.Errorf("resolve = %v; want an error naming --aggregate-type-default", err)
	}
}

// A table the decoder refuses is said in flags: the column's flag, and
// --aggregate-type-default for a missing aggregate type.
func TestColumnErrorsSayFlags(t *testing.T) {
	cols := []decoder.Column{{Name: "MessageId", Type: 2950}, {Name: "AggregateId", Type: 2950}, {Name: "type", Type: 25}, {Name: "Payload", Type: 23}}
	cfg := decoder.Config{Table: schema.Table{Schema: "public", Name: "OutboxMessages"}, Columns: schema.DefaultColumns()}
	cfg.Columns.MessageID, cfg.Columns.AggregateID, cfg.Columns.Payload = "MessageId", "AggregateId", "Payload"
	got := flagged(decoder.CheckColumns(cfg, cols)).Error()
	want := `column "aggregate_type" is missing from public.OutboxMessages; fix: set --column-aggregate-type to its column, or --aggregate-type-default to a constant`
	if got != want {
		t.Errorf("missing aggregate type:\ngot  %s\nwant %s", got, want)
	}
	cfg.AggregateTypeDefault = "order"
	got = withFlags(decoder.CheckColumns(cfg, cols).Fix())
	if want := "set --column-payload to a column of one of those types, or change the column's type"; got != want {
		t.Errorf("payload of integer: got %q; want %q", got, want)
	}
	for f := schema.Field(0); f < schema.NumFields; f++ {
		if said := withFlags(f.Setting()); !strings.HasPrefix(said, "--column-") {
			t.Errorf("%s: said as %q; want a --column- flag", f.Setting(), said)
		}
	}
}

// `walrelay schema` takes the column flags init takes, so that the same
// line that starts walrelay prints its DDL, and --existing judges the
// table by them (a table without an aggregate type column passes with
// --aggregate-type-default).
func TestSchemaHasInitsColumnFlags(t *testing.T) {
	var schemaOpts, initOpts options
	s, i := newFlagSet("schema"), newFlagSet("init")
	bindVerb("schema", s, &schemaOpts)
	bindVerb("init", i, &initOpts)
	for _, name := range i.Names() {
		if strings.HasPrefix(name, "column-") || name == "aggregate-type-default" {
			if !s.Has(name) {
				t.Errorf("schema lacks init's --%s", name)
			}
		}
	}
}

// --column-content-type reaches the decoder and the table's judgement in
// every verb that reads rows, and errors about it name the flag.
func TestColumnContentTypeFlag(t *testing.T) {
	pgtest.CleanEnv(t)
	for _, verb := range []string{"schema", "init", "check", "run", "recover", "replay"} {
		args := []string{"--column-content-type", "ContentType"}
		if verb != "schema" {
			args = append(args, "--postgres-url", "postgres://h/db")
		}
		c := resolveVerb(t, verb, args...)
		if c.Decoder.ContentTypeColumn != "ContentType" || verb != "schema" && c.Slot.ContentTypeColumn != "ContentType" {
			t.Errorf("%s: decoder %q, slot %q; want the flag's column in both", verb, c.Decoder.ContentTypeColumn, c.Slot.ContentTypeColumn)
		}
	}
	_, _, err := runArgs("check", "--postgres-url", "postgres://h/db", "--column-content-type", "payload")
	if err == nil || !strings.Contains(err.Error(), `--column-content-type: column "payload" is configured for both the content type and payload`) {
		t.Errorf("content type column on the payload's: %v; want an error naming --column-content-type", err)
	}
}
