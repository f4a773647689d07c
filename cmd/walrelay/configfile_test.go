package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeConfig writes a config file into the test's directory.
func writeConfig(t *testing.T, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "walrelay.yaml")
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The file sets what it names; a variable wins over it, a flag over both;
// a key of another verb is ignored, as its variable would be.
func TestConfigFileBelowVariablesAndFlags(t *testing.T) {
	p := writeConfig(t, `slot: from_file
publication: pub_file
heartbeat-interval: 3s
topic-template: file.{aggregate_type}
prune-batch: 500 # prune's, not run's: ignored by run
`)
	t.Setenv("WALRELAY_PUBLICATION", "pub_env")
	o, _, err := parseOptions("run", []string{"--config", p, "--topic-template", "flag.{aggregate_type}"}, nil, nil)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if o.Slot.Slot != "from_file" || o.Monitor.HeartbeatInterval != 3*time.Second || o.Publication != "pub_env" ||
		o.Sink.TopicTemplate != "flag.{aggregate_type}" {
		t.Errorf("slot %q, heartbeat %s, publication %q, topic template %q; want the file's slot and heartbeat, the variable's publication, the flag's template",
			o.Slot.Slot, o.Monitor.HeartbeatInterval, o.Publication, o.Sink.TopicTemplate)
	}
	// WALRELAY_CONFIG names it too, and --config=FILE.
	t.Setenv("WALRELAY_CONFIG", p)
	if o, _, err := parseOptions("run", nil, nil, nil); err != nil || o.Slot.Slot != "from_file" {
		t.Errorf("WALRELAY_CONFIG: slot %q, %v; want the file's", o.Slot.Slot, err)
	}
	if o, _, err := parseOptions("status", []string{"--config=" + p}, nil, nil); err != nil || o.Slot.Slot != "from_file" {
		t.Errorf("--config=FILE: slot %q, %v; want the file's", o.Slot.Slot, err)
	}
}

// A file of one table in a tables: list sets that table's flags.
func TestConfigFileOneTable(t *testing.T) {
	p := writeConfig(t, `slot: billing
tables:
  - table: billing.outboxevent
    preset: debezium
    aggregate-type-default: invoice
`)
	o, _, err := parseOptions("run", []string{"--config", p}, nil, nil)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if o.Table != "billing.outboxevent" || o.AggregateTypeDefault != "invoice" || o.Preset != "debezium" || o.Columns.MessageID != "id" {
		t.Errorf("table %q, aggregate type default %q, preset %q, message id column %q; want the entry's, the preset applied",
			o.Table, o.AggregateTypeDefault, o.Preset, o.Columns.MessageID)
	}
}

// Each wrong file is refused before anything is done, with its line and
// what to change, as a settings error (exit 2).
func TestConfigFileRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, verb, data, want string
	}{
		{"unknown key", "run", "slot: s\nslott: t\n", "walrelay.yaml:2: slott is not a setting of walrelay run"},
		{"bad value", "run", "heartbeat-interval: often\n", `walrelay.yaml:1: heartbeat-interval: "often" is not a duration`},
		{"command line only", "prune", "retention: 24h\ndry-run: true\n", "walrelay.yaml:1: retention is given on the command line only (--retention)"},
		{"config in the file", "run", "config: other.yaml\n", "walrelay.yaml:1: config is given on the command line only"},
		{"a table twice", "run", "tables:\n  - table: a\n  - table: public.a\n", "walrelay.yaml:3: table public.a is listed twice (first on line 2)"},
		{"a verb of one table without --table", "dlq list", "tables:\n  - table: a\n  - table: b\n", "walrelay.yaml lists 2 tables: name the one walrelay dlq list acts on with --table (one of a, b)"},
		{"table setting beside tables", "run", "topic-template: x.{type}\ntables:\n  - table: a\n", "walrelay.yaml:1: topic-template is a table's setting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeConfig(t, tc.data)
			_, _, err := parseOptions(tc.verb, []string{"--config", p}, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != 2 {
				t.Errorf("got %v (exit %d); want exit 2 and %q", err, exitCode(err), tc.want)
			}
		})
	}
	if _, _, err := parseOptions("run", []string{"--config", filepath.Join(t.TempDir(), "none.yaml")}, nil, nil); err == nil || exitCode(err) != 2 {
		t.Errorf("a missing file: %v; want exit 2", err)
	}
}

func TestEveryVerbHasConfig(t *testing.T) {
	for _, verb := range verbNames() {
		if h := help(t, strings.Fields(verb)...); !strings.Contains(h, "--config") || !strings.Contains(h, "WALRELAY_CONFIG") {
			t.Errorf("walrelay %s -h: no --config (WALRELAY_CONFIG)", verb)
		}
	}
}

// The README's config file is one walrelay reads as it says.
func TestReadmeConfigFile(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```yaml\n# /etc/walrelay/walrelay.yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatalf("README: no config file block")
	}
	o, _, err := parseOptions("run", []string{"--config", writeConfig(t, block)}, nil, nil)
	if err != nil || o.Table != "public.outbox_messages" || len(o.MoreTables) != 1 || o.KafkaBrokers != "kafka-1:9092,kafka-2:9092,kafka-3:9092" ||
		o.Postgres.PasswordFile != "/run/secrets/walrelay-password" {
		t.Fatalf("README's file: table %q, %d more, brokers %q, password file %q, %v; want what it sets", o.Table, len(o.MoreTables), o.KafkaBrokers, o.Postgres.PasswordFile, err)
	}
	if m := o.MoreTables[0]; m.Table != "billing.outboxevent" || m.Preset != "debezium" || m.Sink.TopicTemplate != "billing.{aggregate_type}" {
		t.Errorf("README's second table: %q, preset %q, template %q; want billing.outboxevent by the debezium preset, its own template", m.Table, m.Preset, m.Sink.TopicTemplate)
	}
}

// With a tables: list, run, check and init take every table, each parsed
// from its own entry; a verb of one table takes the one --table names;
// a table-level flag or variable, which would say nothing of which table,
// is refused.
func TestConfigFileSeveralTables(t *testing.T) {
	p := writeConfig(t, `slot: shared
tables:
  - table: public.outbox_messages
    topic-template: own.{aggregate_type}
  - table: billing.outboxevent
    preset: debezium
`)
	o, _, err := parseOptions("run", []string{"--config", p}, nil, nil)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if o.Table != "public.outbox_messages" || o.Sink.TopicTemplate != "own.{aggregate_type}" || len(o.MoreTables) != 1 {
		t.Fatalf("run: table %q, template %q, %d more; want the first table and one more", o.Table, o.Sink.TopicTemplate, len(o.MoreTables))
	}
	if m := o.MoreTables[0]; m.Table != "billing.outboxevent" || m.Columns.MessageID != "id" || m.Slot.Slot != "shared" || m.Sink.TopicTemplate != "outbox.event.{aggregate_type}" {
		t.Errorf("run's second table: table %q, id column %q, slot %q, template %q; want its entry, the preset applied, the shared slot",
			m.Table, m.Columns.MessageID, m.Slot.Slot, m.Sink.TopicTemplate)
	}
	o, _, err = parseOptions("dlq list", []string{"--config", p, "--table", "billing.outboxevent"}, nil, nil)
	if err != nil || o.Table != "billing.outboxevent" || len(o.MoreTables) != 0 {
		t.Errorf("dlq list --table billing.outboxevent: table %q, %d more, %v; want that table alone", o.Table, len(o.MoreTables), err)
	}
	if _, _, err := parseOptions("dlq list", []string{"--config", p, "--table", "other"}, nil, nil); err == nil || !strings.Contains(err.Error(), "--table other is none of the tables") {
		t.Errorf("dlq list --table other: %v; want it refused", err)
	}
	if _, _, err := parseOptions("run", []string{"--config", p, "--topic-template", "x.{type}"}, nil, nil); err == nil ||
		!strings.Contains(err.Error(), "--topic-template: "+p+" lists 2 tables: set a table's topic-template in its entry there") {
		t.Errorf("run --topic-template: %v; want it refused", err)
	}
	t.Setenv("WALRELAY_TABLE", "public.outbox_messages")
	if _, _, err := parseOptions("check", []string{"--config", p}, nil, nil); err == nil || !strings.Contains(err.Error(), "WALRELAY_TABLE is set") {
		t.Errorf("check with WALRELAY_TABLE: %v; want it refused", err)
	}
}
